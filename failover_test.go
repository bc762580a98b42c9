package zklock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// holders checks mutual exclusion in the presence of lost leases: when a
// lease is granted, the previous holder must have released or seen its lease
// end. Tokens must grow with every holder.
type holders struct {
	mu        sync.Mutex
	current   *zklock.Lease
	lastToken int64
	overlaps  int
	shrinks   int
	granted   int
	failed    int   // acquisitions that ended in an error
	lastErr   error // the latest of them
}

// explainOnFailure logs, if t fails, what the workers and clients were
// doing: how many grants and failed acquisitions, the last error, and each
// client's session state.
func (h *holders) explainOnFailure(t *testing.T, clients []*zklock.Client) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		states := make([]string, len(clients))
		for i, c := range clients {
			states[i] = c.State().String()
		}
		t.Logf("granted %d, failed %d (last: %v); client states %v", h.granted, h.failed, h.lastErr, states)
	})
}

func (h *holders) acquired(l *zklock.Lease) {
	tok := tokenOf(l)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.current != nil {
		select {
		case <-h.current.Done():
		default:
			h.overlaps++
		}
	}
	if tok != 0 && tok <= h.lastToken {
		h.shrinks++
	}
	if tok > h.lastToken {
		h.lastToken = tok
	}
	h.current = l
	h.granted++
}

func (h *holders) releasing(l *zklock.Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.current == l {
		h.current = nil
	}
}

// contend runs workers that acquire, hold briefly and release until the
// returned stop is called (by the test, or by its cleanup if it fails
// first: the workers end before their clients close). Every Acquire must
// succeed or return by its deadline.
func contend(t *testing.T, clients []*zklock.Client, p string, h *holders) (stop func()) {
	var wg sync.WaitGroup
	done := make(chan struct{})
	var once sync.Once
	stop = func() { once.Do(func() { close(done) }); wg.Wait() }
	t.Cleanup(stop)
	const deadline = 20 * time.Second
	for _, c := range clients {
		m, err := c.NewMutex(p)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				l, err := m.Acquire(ctx)
				cancel()
				if err != nil {
					h.mu.Lock()
					h.failed, h.lastErr = h.failed+1, err
					h.mu.Unlock()
					assert.ErrorIs(t, err, context.DeadlineExceeded)
					assert.Less(t, time.Since(start), deadline+2*time.Second, "Acquire overran its deadline")
					continue
				}
				h.acquired(l)
				time.Sleep(time.Millisecond)
				h.releasing(l)
				rctx, rcancel := context.WithTimeout(context.Background(), deadline)
				err = l.Release(rctx)
				rcancel()
				if err != nil && !errors.Is(err, zklock.ErrLockLost) {
					assert.NoError(t, err)
				}
			}
		}()
	}
	return stop
}

func TestServerRestartWithHolderAndWaiters(t *testing.T) {
	t.Parallel()
	zc := zktest.Start(t)
	var clients []*zklock.Client
	for i := 0; i < 4; i++ {
		clients = append(clients, connectVia(t, zc.Addrs(), zklock.WithSessionTimeout(15*time.Second)))
	}
	obs := clients[0]
	const p = "/restart/lock"
	h := &holders{}
	h.explainOnFailure(t, clients)
	stop := contend(t, clients, p, h)

	eventually(t, "some hand-offs before the restart", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.granted >= 20 })
	srv := zc.Servers()[0]
	require.NoError(t, srv.Stop())
	before := func() int { h.mu.Lock(); defer h.mu.Unlock(); return h.granted }()
	require.NoError(t, srv.Restart(ctxTimeout(t, 60*time.Second)))
	eventuallyWithin(t, 30*time.Second, "hand-offs after the restart", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.granted >= before+20 })
	stop()

	require.Zero(t, h.overlaps, "two holders at once")
	require.Zero(t, h.shrinks, "a fencing token went backwards")
	cs, err := obs.Contenders(context.Background(), p)
	require.NoError(t, err)
	require.Empty(t, cs, "orphan lock nodes")
}

func TestEnsembleLeaderKilledWhileContending(t *testing.T) {
	t.Parallel()
	zc := zktest.Start(t, zktest.WithEnsemble(3))
	var clients []*zklock.Client
	for i := 0; i < 8; i++ {
		clients = append(clients, connectVia(t, zc.Addrs(), zklock.WithSessionTimeout(8*time.Second)))
	}
	const p = "/ensemble/lock"
	h := &holders{}
	h.explainOnFailure(t, clients)
	stop := contend(t, clients, p, h)

	eventually(t, "hand-offs before the kill", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.granted >= 20 })
	leader, err := zc.Leader()
	require.NoError(t, err)
	require.NoError(t, zc.Servers()[leader].Kill())
	before := func() int { h.mu.Lock(); defer h.mu.Unlock(); return h.granted }()
	eventuallyWithin(t, 30*time.Second, "hand-offs after the leader died", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.granted >= before+20 })
	stop()
	require.Zero(t, h.overlaps, "two holders at once")
	require.Zero(t, h.shrinks, "a fencing token went backwards")
	t.Logf("%d grants, leader was server %d", h.granted, leader+1)
}
