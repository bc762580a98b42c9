package zklock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
)

// recTracer records what zklock tells a Tracer; each acquisition's context
// is "tp-<n>".
type recTracer struct {
	mu    sync.Mutex
	spans []*recSpan
}

type recSpan struct {
	t               *recTracer
	id, kind, path  string
	queued          int
	waitedFor       []string
	granted, failed bool
	token           int64
	ended           error
}

func (t *recTracer) StartAcquire(_ context.Context, kind, path string) zklock.AcquireSpan {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := &recSpan{t: t, id: fmt.Sprintf("tp-%d", len(t.spans)), kind: kind, path: path}
	t.spans = append(t.spans, s)
	return s
}

func (s *recSpan) Context() string { return s.id }
func (s *recSpan) Queued(n int)    { s.t.mu.Lock(); s.queued = n; s.t.mu.Unlock() }
func (s *recSpan) WaitingFor(tp string) {
	s.t.mu.Lock()
	s.waitedFor = append(s.waitedFor, tp)
	s.t.mu.Unlock()
}
func (s *recSpan) Granted(_ string, token int64) zklock.HoldSpan {
	s.t.mu.Lock()
	s.granted, s.token = true, token
	s.t.mu.Unlock()
	return s
}
func (s *recSpan) Failed(error) { s.t.mu.Lock(); s.failed = true; s.t.mu.Unlock() }
func (s *recSpan) Ended(why error) {
	s.t.mu.Lock()
	s.ended = why
	s.t.mu.Unlock()
}

// A waiter's trace names the holder it waited for, through the trace
// context the holder's node records; each acquisition reports its queue,
// its token and its hold's end.
func TestTracerLinksTheWaiterToTheHolder(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	tr := &recTracer{}
	c := connect(t, zklock.WithTracer(tr))
	m := mustMutex(t, c, p)
	h, err := m.Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	got := make(chan *zklock.Lease, 1)
	go func() {
		l, err := m.Acquire(ctxTimeout(t, 10*time.Second))
		require.NoError(t, err)
		got <- l
	}()
	waitChildren(t, obs, p, 2)
	eventually(t, "the waiter names the holder", func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return len(tr.spans) == 2 && len(tr.spans[1].waitedFor) == 1
	})
	th := tokenOf(h) // a token is a holder's: read it while held
	require.NoError(t, h.Release(context.Background()))
	w := <-got
	tw := tokenOf(w)
	_, err = m.TryAcquire(ctxTimeout(t, 5*time.Second))
	require.ErrorIs(t, err, zklock.ErrLocked)
	require.NoError(t, w.Release(context.Background()))

	tr.mu.Lock()
	defer tr.mu.Unlock()
	require.Len(t, tr.spans, 3)
	holder, waiter, tried := tr.spans[0], tr.spans[1], tr.spans[2]
	require.Equal(t, []string{holder.id}, waiter.waitedFor, "the waiter waited for the holder's acquisition")
	require.Equal(t, zklock.KindMutex, waiter.kind)
	require.Equal(t, p, waiter.path)
	require.Equal(t, 1, holder.queued)
	require.Equal(t, 2, waiter.queued)
	require.True(t, holder.granted && waiter.granted && tried.failed)
	require.Equal(t, th, holder.token)
	require.Equal(t, tw, waiter.token)
	require.ErrorIs(t, holder.ended, zklock.ErrReleased)
	require.ErrorIs(t, waiter.ended, zklock.ErrReleased)
}
