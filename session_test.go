package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// connectVia opens a Client on the given addresses (a proxy, another cluster).
func connectVia(t testing.TB, addrs []string, opts ...zklock.Option) *zklock.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := zklock.Connect(ctx, addrs, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// A holder cut off from ZooKeeper must learn that its lease is gone before
// anyone else can be granted the lock. Both moments are read from one
// monotonic clock in this process.
func TestPartitionedHolderLosesLeaseBeforeAnotherAcquires(t *testing.T) {
	for _, timeout := range []time.Duration{time.Second, 1500 * time.Millisecond, 2 * time.Second} {
		t.Run(timeout.String(), func(t *testing.T) {
			p := lockPath(t)
			obs := observer(t)
			proxy := zktest.NewProxy(t, cluster.Addrs()...)
			holder := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(timeout))
			m, err := holder.NewMutex(p)
			require.NoError(t, err)
			l, err := m.Acquire(context.Background())
			require.NoError(t, err)

			other, err := connect(t).NewMutex(p)
			require.NoError(t, err)
			acquired := make(chan time.Time, 1)
			go func() {
				ol, err := other.Acquire(ctxTimeout(t, 30*time.Second))
				at := time.Now()
				if assert.NoError(t, err) {
					assert.NoError(t, ol.Release(context.Background()))
				}
				acquired <- at
			}()
			waitChildren(t, obs, p, 2)

			proxy.Stall()
			stalled := time.Now()
			<-l.Done()
			doneAt := time.Now()
			otherAt := <-acquired
			proxy.Resume()

			require.ErrorIs(t, l.Err(), zklock.ErrLockLost)
			require.True(t, doneAt.Before(otherAt), "holder learned of the loss %v after the other acquired", doneAt.Sub(otherAt))
			t.Logf("session %v: lease lost %v after the stall, %v before the next holder",
				timeout, doneAt.Sub(stalled).Round(time.Millisecond), otherAt.Sub(doneAt).Round(time.Millisecond))
		})
	}
}

func TestLeaseLostWhenNodeDeletedBySomeoneElse(t *testing.T) {
	_, obs, _, l := holding(t)
	l.Token() // the own-node watch is in place once the token is known
	require.NoError(t, obs.Delete(l.Node(), -1))
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed after the node was deleted")
	}
	require.ErrorIs(t, l.Err(), zklock.ErrLockLost)
	require.ErrorIs(t, l.Release(context.Background()), zklock.ErrLockLost, "releasing a lost lease reports the loss")
}

func TestShortDisconnectKeepsLease(t *testing.T) {
	const timeout = 2 * time.Second
	p := lockPath(t)
	obs := observer(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	c := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(timeout))
	m, err := c.NewMutex(p)
	require.NoError(t, err)
	l, err := m.Acquire(context.Background())
	require.NoError(t, err)
	l.Token()

	// A stall well inside the deadline, then a reset connection: go-zookeeper
	// reconnects to the same session.
	proxy.Stall()
	time.Sleep(timeout / 5)
	proxy.Resume()
	proxy.Cut()
	select {
	case <-l.Done():
		t.Fatalf("lease ended after a short disconnect: %v", l.Err())
	case <-time.After(timeout):
	}
	require.NoError(t, l.Err())
	require.NoError(t, l.Release(ctxTimeout(t, 10*time.Second)))
	require.Empty(t, lockChildren(t, obs, p))
}

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
}

func (h *holders) acquired(l *zklock.Lease) {
	tok := l.Token()
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

// contend runs workers that acquire, hold briefly and release until stop is
// closed. Every Acquire must succeed or return by its deadline.
func contend(t *testing.T, clients []*zklock.Client, p string, h *holders, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	const deadline = 20 * time.Second
	for _, c := range clients {
		m, err := c.NewMutex(p)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				l, err := m.Acquire(ctx)
				cancel()
				if err != nil {
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
	return &wg
}

func TestServerRestartWithHolderAndWaiters(t *testing.T) {
	zc := zktest.Start(t)
	var clients []*zklock.Client
	for i := 0; i < 4; i++ {
		clients = append(clients, connectVia(t, zc.Addrs(), zklock.WithSessionTimeout(15*time.Second)))
	}
	obs := clients[0]
	const p = "/restart/lock"
	h := &holders{}
	stop := make(chan struct{})
	wg := contend(t, clients, p, h, stop)

	eventually(t, "some hand-offs before the restart", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.granted >= 20 })
	srv := zc.Servers()[0]
	require.NoError(t, srv.Stop())
	before := func() int { h.mu.Lock(); defer h.mu.Unlock(); return h.granted }()
	require.NoError(t, srv.Restart(ctxTimeout(t, 60*time.Second)))
	eventually(t, "hand-offs after the restart", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.granted >= before+20 })
	close(stop)
	wg.Wait()

	require.Zero(t, h.overlaps, "two holders at once")
	require.Zero(t, h.shrinks, "a fencing token went backwards")
	cs, err := obs.Contenders(context.Background(), p)
	require.NoError(t, err)
	require.Empty(t, cs, "orphan lock nodes")
}

func TestEnsembleLeaderKilledWhileContending(t *testing.T) {
	zc := zktest.Start(t, zktest.WithEnsemble(3))
	var clients []*zklock.Client
	for i := 0; i < 8; i++ {
		clients = append(clients, connectVia(t, zc.Addrs(), zklock.WithSessionTimeout(8*time.Second)))
	}
	const p = "/ensemble/lock"
	h := &holders{}
	stop := make(chan struct{})
	wg := contend(t, clients, p, h, stop)

	eventually(t, "hand-offs before the kill", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.granted >= 20 })
	leader, err := zc.Leader()
	require.NoError(t, err)
	require.NoError(t, zc.Servers()[leader].Kill())
	before := func() int { h.mu.Lock(); defer h.mu.Unlock(); return h.granted }()
	eventually30 := func(what string, cond func() bool) {
		deadline := time.Now().Add(60 * time.Second)
		for !cond() {
			require.True(t, time.Now().Before(deadline), "timed out waiting for %s", what)
			time.Sleep(20 * time.Millisecond)
		}
	}
	eventually30("hand-offs after the leader died", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.granted >= before+20 })
	close(stop)
	wg.Wait()
	require.Zero(t, h.overlaps, "two holders at once")
	require.Zero(t, h.shrinks, "a fencing token went backwards")
	t.Logf("%d grants, leader was server %d", h.granted, leader+1)
}

func TestDoCancelsFnOnLoss(t *testing.T) {
	const timeout = time.Second
	p := lockPath(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	c := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(timeout))
	m, err := c.NewMutex(p)
	require.NoError(t, err)
	running := make(chan struct{})
	var cause error
	err = m.Do(context.Background(), func(ctx context.Context) error {
		close(running)
		proxy.Stall()
		<-ctx.Done()
		cause = context.Cause(ctx)
		return ctx.Err()
	})
	proxy.Resume()
	proxy.Cut() // the stalled connections are stale: reconnect at once
	require.ErrorIs(t, err, zklock.ErrLockLost)
	require.ErrorIs(t, cause, zklock.ErrLockLost)

	// After the partition heals, Do works again on a new session.
	err = m.Do(ctxTimeout(t, 30*time.Second), func(ctx context.Context) error { return errors.New("boom") })
	require.EqualError(t, err, "boom")
}

func TestRunSingletonHandsOverOnPartition(t *testing.T) {
	const timeout = time.Second
	p := lockPath(t)
	obs := observer(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	a := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(timeout))
	b := connect(t)

	var running atomic.Int32
	var overlaps atomic.Int32
	type event struct {
		who  string
		what string
		at   time.Time
	}
	events := make(chan event, 64)
	fn := func(who string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			if running.Add(1) != 1 {
				overlaps.Add(1)
			}
			events <- event{who, "start", time.Now()}
			<-ctx.Done()
			running.Add(-1)
			events <- event{who, "stop", time.Now()}
			return ctx.Err()
		}
	}
	ctxA, cancelA := context.WithCancel(context.Background())
	ctxB, cancelB := context.WithCancel(context.Background())
	doneA := make(chan error, 1)
	doneB := make(chan error, 1)
	lostA := make(chan error, 4)
	go func() {
		doneA <- zklock.RunSingleton(ctxA, a, p, fn("a"), zklock.OnLost(func(err error) { lostA <- err }))
	}()
	require.Equal(t, event{"a", "start", time.Time{}}.what, (<-events).what)
	go func() { doneB <- zklock.RunSingleton(ctxB, b, p, fn("b")) }()
	waitChildren(t, obs, p, 2)

	proxy.Stall()
	stopA := <-events
	require.Equal(t, "a", stopA.who)
	require.Equal(t, "stop", stopA.what)
	startB := <-events
	require.Equal(t, "b", startB.who)
	require.Equal(t, "start", startB.what)
	require.True(t, stopA.at.Before(startB.at), "a still ran when b started")
	require.ErrorIs(t, <-lostA, zklock.ErrLockLost)

	// Healed, a campaigns again and waits behind b.
	proxy.Resume()
	proxy.Cut()
	waitChildren(t, obs, p, 2)
	cancelB()
	require.ErrorIs(t, <-doneB, context.Canceled)
	ev := <-events
	require.Equal(t, "b", ev.who)
	ev = <-events
	require.Equal(t, fmt.Sprint("a", "start"), ev.who+ev.what)
	cancelA()
	require.ErrorIs(t, <-doneA, context.Canceled)
	require.Zero(t, overlaps.Load(), "two singletons ran at once")
}

// Close is bounded even when the server cannot be reached: what it cannot
// delete in time goes with the session it closes.
func TestCloseIsBoundedDuringPartition(t *testing.T) {
	p := lockPath(t)
	obs := observer(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	c := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(2*time.Second), zklock.WithCleanupTimeout(500*time.Millisecond))
	m, err := c.NewMutex(p)
	require.NoError(t, err)
	l, err := m.Acquire(context.Background())
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { _, err := m.Acquire(context.Background()); errc <- err }()
	waitChildren(t, obs, p, 2)

	proxy.Stall()
	start := time.Now()
	require.NoError(t, c.Close())
	took := time.Since(start)
	require.Less(t, took, 2*time.Second, "Close hung on an unreachable server")
	require.ErrorIs(t, <-errc, zklock.ErrClosed)
	<-l.Done()
	proxy.Resume()
	waitChildren(t, obs, p, 0) // the session ended; its nodes went with it
	t.Logf("Close took %v while partitioned", took.Round(time.Millisecond))
}

// A waiter whose session expires queues again on the new session, at the
// back; with WithRequeueOnExpiry(false) it fails instead.
func TestWaiterSessionExpiry(t *testing.T) {
	for _, requeue := range []bool{true, false} {
		t.Run(fmt.Sprint("requeue=", requeue), func(t *testing.T) {
			p, obs, m, holder := holding(t)
			proxy := zktest.NewProxy(t, cluster.Addrs()...)
			wc := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(time.Second), zklock.WithRequeueOnExpiry(requeue))
			wm, err := wc.NewMutex(p)
			require.NoError(t, err)
			type result struct {
				l   *zklock.Lease
				err error
			}
			waiter := make(chan result, 1)
			go func() {
				l, err := wm.Acquire(ctxTimeout(t, 30*time.Second))
				waiter <- result{l, err}
			}()
			waitChildren(t, obs, p, 2)

			proxy.Stall()
			waitChildren(t, obs, p, 1) // the server expired the waiter's session
			late := make(chan *zklock.Lease, 1)
			go func() {
				l, err := m.Acquire(context.Background())
				assert.NoError(t, err)
				late <- l
			}()
			waitChildren(t, obs, p, 2)
			proxy.Resume()
			proxy.Cut()

			if !requeue {
				r := <-waiter
				require.ErrorIs(t, r.err, zklock.ErrSessionExpired)
				require.NoError(t, holder.Release(context.Background()))
				require.NoError(t, (<-late).Release(context.Background()))
				return
			}
			waitChildren(t, obs, p, 3) // queued again, at the back
			require.NoError(t, holder.Release(context.Background()))
			l := <-late
			select {
			case r := <-waiter:
				t.Fatalf("the re-queued waiter jumped the queue: %v", r.err)
			default:
			}
			require.NoError(t, l.Release(context.Background()))
			r := <-waiter
			require.NoError(t, r.err)
			require.NoError(t, r.l.Release(context.Background()))
		})
	}
}

// A Client built on the caller's connection: it sees the session through the
// caller's event channel, passes every event on, leaves the connection open
// on Close, and presumes a lease lost as soon as the connection drops.
func TestNewClientOnCallersConnection(t *testing.T) {
	p := lockPath(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	conn, events, err := zk.Connect([]string{proxy.Addr()}, 4*time.Second, zk.WithLogger(log.New(io.Discard, "", 0)), zk.WithLogInfo(false))
	require.NoError(t, err)
	defer conn.Close()
	seen := make(chan zk.State, 64)
	c, err := zklock.NewClient(conn, events, zklock.WithEventHandler(func(ev zk.Event) {
		if ev.Type == zk.EventSession {
			select {
			case seen <- ev.State:
			default:
			}
		}
	}))
	require.NoError(t, err)
	waitState := func(want zk.State) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			select {
			case s := <-seen:
				if s == want {
					return
				}
			case <-deadline:
				t.Fatalf("never saw %v", want)
			}
		}
	}
	waitState(zk.StateHasSession)

	m, err := c.NewMutex(p)
	require.NoError(t, err)
	l, err := m.Acquire(ctxTimeout(t, 20*time.Second))
	require.NoError(t, err)
	proxy.Cut()
	waitState(zk.StateDisconnected)
	<-l.Done()
	require.ErrorIs(t, l.Err(), zklock.ErrLockLost, "without the wire clock a drop ends the lease at once")
	waitState(zk.StateHasSession)

	l, err = m.Acquire(ctxTimeout(t, 20*time.Second))
	require.NoError(t, err)
	require.NoError(t, l.Release(context.Background()))
	require.NoError(t, c.Close())
	_, _, err = conn.Exists("/")
	require.NoError(t, err, "Close leaves the caller's connection open")
}
