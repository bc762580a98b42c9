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

// The fencing token read off the create's reply equals the node's creation
// zxid as the server reports it, under concurrency: four clients, each with
// writers of its own, on two paths, every create racing others' writes.
func TestTokenFromTheCreateReplyIsTheCzxid(t *testing.T) {
	t.Parallel()
	obs := observer(t)
	paths := []string{lockPath(t), lockPath(t)}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		c := connect(t)
		for w := 0; w < 2; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m := mustMutex(t, c, paths[(i+w)%2])
				for n := 0; n < 10; n++ {
					l, err := m.Acquire(ctxTimeout(t, 20*time.Second))
					if !assert.NoError(t, err) {
						return
					}
					tok, err := l.Token(context.Background())
					assert.NoError(t, err)
					_, stat, err := obs.Get(l.Node())
					if assert.NoError(t, err) {
						assert.Equal(t, stat.Czxid, tok, "token of %s", l.Node())
					}
					assert.NoError(t, l.Release(context.Background()))
				}
			}()
		}
	}
	wg.Wait()
}

// A waiter that was next in line holds as soon as the release reaches it: the
// hand-off costs no request after the holder's delete. Through a proxy that
// delays every chunk 20 ms each way, the time from the holder's delete being
// confirmed to the waiter holding is one one-way trip (the watch event), not
// two more (a read of the waiter's own node).
func TestHandOffNeedsNoRoundTripAfterTheRelease(t *testing.T) {
	t.Parallel()
	const oneWay = 20 * time.Millisecond
	p := lockPath(t)
	obs := observer(t)
	holder, err := mustMutex(t, connect(t), p).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	proxy.SetDelay(oneWay)
	w := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(testSession))
	got, released := make(chan time.Time, 1), make(chan struct{})
	go func() {
		defer close(released) // before the test ends and closes w
		l, err := mustMutex(t, w, p).Acquire(ctxTimeout(t, 20*time.Second))
		got <- time.Now()
		if assert.NoError(t, err) {
			assert.NoError(t, l.Release(context.Background()))
		}
	}()
	defer func() { <-released }()
	waitChildren(t, obs, p, 2)
	time.Sleep(10 * oneWay) // the waiter's watches are set (they ride the proxy's delay)
	require.NoError(t, holder.Release(context.Background()))
	releasedAt := time.Now()
	took := (<-got).Sub(releasedAt)
	t.Logf("waiter held %v after the release was confirmed (one way: %v)", took.Round(time.Millisecond), oneWay)
	require.Less(t, took, 3*oneWay, "the waiter made a round trip after the release")
}

// The shortcut is safe: when the waiter's own node is deleted by someone
// else before the holder leaves, the waiter is not granted on the dead node.
// (The order of events tells, with no read.)
func TestHandOffRefusedWhenTheWaitersNodeWentFirst(t *testing.T) {
	for i := 0; i < 5; i++ {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			p, obs, _, holder := holding(t)
			tokenOf(holder)
			base := mntr(t).WatchCount()
			c := connect(t, zklock.WithRequeueOnExpiry(false))
			errc := make(chan error, 1)
			go func() {
				l, err := mustMutex(t, c, p).Acquire(ctxTimeout(t, 20*time.Second))
				if err == nil {
					_ = l.Release(context.Background())
				}
				errc <- err
			}()
			children := waitChildren(t, obs, p, 2)
			eventually(t, "the waiter's two watches", func() bool { return mntr(t).WatchCount() >= base+2 })
			waiter := lockChildren(t, obs, p)[1]
			require.Len(t, children, 2)
			require.NoError(t, obs.Delete(p+"/"+waiter, -1))
			require.NoError(t, holder.Release(context.Background()))
			require.ErrorIs(t, <-errc, zklock.ErrQueueNodeDeleted)
		})
	}
}

// After a reconnect the order of events proves nothing across the two
// connections (go-zookeeper restores watches in no particular order), so a
// grant after a reconnect must rest on an own-node read made on the
// connection that delivered the deletion, or made after the deletion was
// seen. Which read that is depends on timing: the read sent with the watch
// before the cut may come back on the old connection (then the grant reads
// the node: confirmHead), or be lost with the cut (then the next wait reads
// it again on the new connection, before the release, and the deletion's
// order on that connection proves it), or the waiter may still be backing
// off when the holder leaves (then a listing grants it). The test checks the
// proof in each case, not a count in one window.
func TestHandOffAfterAReconnectReadsTheOwnNode(t *testing.T) {
	p, obs, _, holder := holding(t)
	tokenOf(holder)
	base := mntr(t).WatchCount()
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	states := make(chan zk.State, 64)
	w := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(testSession),
		zklock.WithEventHandler(func(ev zk.Event) {
			if ev.Type == zk.EventSession {
				states <- ev.State
			}
		}))
	got, gotCopy := make(chan *zklock.Lease, 1), make(chan *zklock.Lease, 1)
	go func() {
		l, err := mustMutex(t, w, p).Acquire(ctxTimeout(t, 20*time.Second))
		assert.NoError(t, err)
		got <- l
	}()
	waitChildren(t, obs, p, 2)
	eventually(t, "the waiter's two watches", func() bool { return mntr(t).WatchCount() >= base+2 })
	before := zklock.ConnEpoch(w)
	proxy.Cut()
	for s := range states { // the same session, on a new connection
		if s == zk.StateHasSession {
			break
		}
	}
	eventually(t, "the watches restored", func() bool { return mntr(t).WatchCount() >= base+2 })
	c := costOf(t, func() {
		require.NoError(t, holder.Release(context.Background()))
		l := <-got
		require.NotNil(t, l)
		gotCopy <- l
		t.Cleanup(func() { _ = l.Release(context.Background()) })
	})
	l := <-gotCopy
	read, grant, after := zklock.HandOffProof(l)
	t.Logf("connection epoch before the cut %d; own read sent on %d, granted on %d, read after the deletion %v; reads %d",
		before, read, grant, after, c.reads)
	require.EqualValues(t, 1, c.writes)
	if grant == 0 { // held from a listing made in the window, after the reconnect
		require.GreaterOrEqual(t, c.reads, int64(1), "the listing that granted")
		return
	}
	require.Greater(t, grant, before, "granted on the new connection")
	require.True(t, after || read == grant,
		"the grant rests on an own read made on the connection that delivered the deletion, or after it")
	if after { // the read that proves it was made in the window
		require.GreaterOrEqual(t, c.reads, int64(1), "the hand-off after a reconnect reads the own node")
	}
}
