package zklock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// A waiter whose session expires queues again on the new session, at the
// back; with WithRequeueOnExpiry(false) it fails instead.
func TestWaiterSessionExpiry(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	p := lockPath(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	conn, events := rawConn(t, []string{proxy.Addr()}, 4*time.Second)
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

// The create's reply arrives on its session, but the session is read after
// it. The interleaving: between the two, the session expires and a new one
// opens (a pause). The node belongs to the expired session and is gone; the
// waiter must not take it for the new session's node (then it would find
// it "deleted by someone else", or, on a follower that has not yet applied
// the expiry, hold on a dead node). It looks for it, finds none of the live
// session, and queues again: Acquire succeeds on a node the live session owns.
func TestCreateWhoseSessionExpiredBeforeItsSessionWasRead(t *testing.T) {
	p := lockPath(t)
	obs := observer(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	wc := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(time.Second))
	require.NoError(t, zklock.EnsureParents(ctxTimeout(t, 5*time.Second), wc, p)) // the create succeeds at once
	first := wc.Conn().SessionID()
	var once sync.Once
	zklock.SetHookAfterCreate(func() {
		once.Do(func() {
			proxy.Stall()
			waitChildren(t, obs, p, 0) // the server expired the session and its node
			proxy.Resume()
			proxy.Cut()
			eventually(t, "a new session", func() bool {
				s := wc.Conn().SessionID()
				return s != 0 && s != first
			})
		})
	})
	t.Cleanup(func() { zklock.SetHookAfterCreate(nil) })
	l, err := mustMutex(t, wc, p).Acquire(ctxTimeout(t, 30*time.Second))
	require.NoError(t, err)
	ok, stat, err := obs.Exists(l.Node())
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, wc.Conn().SessionID(), stat.EphemeralOwner, "the lease's node is the live session's")
	require.NoError(t, l.Err())
	require.NoError(t, l.Release(context.Background()))
}
