//go:build linux

package zklock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// clientsFollowAnEnsembleMovedByReconfig (TestOperatorFaults/reconfig)
// replaces every server of a 3-server ensemble, one at a time, with a new
// one on new ports (a reconfig adds it, another removes an old one, which is
// then stopped), while one client holds, two wait and three cycle a lock. The clients follow
// /zookeeper/config: they end dialling the new servers only, the holder
// keeps its lease and the queue its order, no two hold at once; a client
// under a chroot follows too. A client that does not follow
// (WithFollowEnsemble(false)) is cut off once the last old server is gone.
func clientsFollowAnEnsembleMovedByReconfig(t *testing.T, zc *zktest.Cluster) {
	old := zc.Addrs()
	q := newHeldQueue(t, old)
	static := connectVia(t, old, operatorSession, zklock.WithFollowEnsemble(false))
	followers := append([]*zklock.Client(nil), q.clients...)
	// A client under a chroot reads the configuration at its absolute path.
	followers = append(followers, connectVia(t, []string{strings.Join(old, ",") + "/chrooted"}, operatorSession))
	cycling, h, stop := cyclingClients(t, old)
	followers = append(followers, cycling...)
	for _, s := range zc.Servers() {
		_, err := zc.AddServer(ctxTimeout(t, 2*time.Minute))
		require.NoError(t, err)
		require.NoError(t, zc.RemoveServer(ctxTimeout(t, 2*time.Minute), s.ID()-1))
	}
	moved := zc.Addrs()
	eventually(t, "every client dials the new servers", func() bool {
		for _, c := range followers {
			if !sameSet(c.Servers(), moved) {
				return false
			}
		}
		return true
	})
	before := func() int { h.mu.Lock(); defer h.mu.Unlock(); return h.granted }()
	eventuallyWithin(t, 30*time.Second, "hand-offs on the new servers", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.granted >= before+20 })
	stop()

	q.kept(t, "a move of the ensemble")
	require.Zero(t, h.overlaps, "two holders at once")
	require.Zero(t, h.shrinks, "a fencing token went backwards")

	require.True(t, sameSet(old, static.Servers()), "a client told not to follow changed its servers: %v", static.Servers())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := static.Contenders(ctx, q.p)
	require.ErrorIs(t, err, zklock.ErrUnreachable, "a client dialling only removed servers reached the ensemble")
	t.Logf("%d grants on the cycling path while the ensemble moved from %v to %v", h.granted, old, moved)
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, s := range a {
		seen[s]++
	}
	for _, s := range b {
		if seen[s] == 0 {
			return false
		}
		seen[s]--
	}
	return true
}
