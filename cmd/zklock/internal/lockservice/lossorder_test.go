package lockservice_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock/cmd/zklock/internal/lockservice"
	"github.com/zklock/zklock/zktest"
)

// TestLossBeforeGrantEveryKind stages the order a review suspected: the
// holder's node is deleted, and the service handles the waiter's grant
// (which the deletion caused) before the holder's monitor reports the loss,
// here 500ms later. For every kind the holder's stream says "lost" before
// the waiter's says "granted". A shared grant (a semaphore's permit) had no
// guard against it: it waited only for holdings whose lease had ended.
func TestLossBeforeGrantEveryKind(t *testing.T) {
	s := serve(t, lockservice.Config{})
	lockservice.StageLateLoss(s.svc, 500*time.Millisecond)
	raw := zktest.Connect(t, cluster.Addrs(), 4*time.Second)
	for _, tc := range []struct {
		name           string
		holder, waiter lockservice.AcquireRequest
		queued         int // nodes in the queue once the waiter waits
	}{
		{"mutex", lockservice.AcquireRequest{}, lockservice.AcquireRequest{}, 2},
		{"reader then writer", lockservice.AcquireRequest{Kind: "read"}, lockservice.AcquireRequest{Kind: "write"}, 2},
		{"writer then reader", lockservice.AcquireRequest{Kind: "write"}, lockservice.AcquireRequest{Kind: "read"}, 2},
		{"semaphore", lockservice.AcquireRequest{Kind: "semaphore", Limit: 1}, lockservice.AcquireRequest{Kind: "semaphore", Limit: 1}, 2},
		// The holder's two permits and the waiter's first, which waits for
		// room for both of its own. Waiting for 2 here passed before the
		// waiter had queued, and timed out when it queued first.
		{"semaphore 2 of 3", lockservice.AcquireRequest{Kind: "semaphore", Limit: 3, Permits: 2}, lockservice.AcquireRequest{Kind: "semaphore", Limit: 3, Permits: 2}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := lockPath(t)
			tc.holder.Path, tc.waiter.Path = p, p
			a := s.open(t, "/v1/lock/acquire", tc.holder)
			require.Equal(t, http.StatusOK, a.status(t))
			granted := a.next(t)
			require.Equal(t, "granted", granted.Event)
			b := s.open(t, "/v1/lock/acquire", tc.waiter)
			waitQueue(t, s.client, p, tc.queued)

			require.NoError(t, raw.Delete(strings.Split(granted.Node, ",")[0], -1)) // k permits: k nodes, one deleted
			bGranted := b.next(t)
			lost := a.next(t)
			require.Equal(t, "granted", bGranted.Event)
			require.Equal(t, "lost", lost.Event)
			require.Less(t, lost.Seq, bGranted.Seq, "the loss was written before the next grant")
			b.leave(t)
			waitQueue(t, s.client, p, 0)
		})
	}
}
