package zklock_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// connectBound is how long Connect and Close may run past their deadline.
const connectBound = 1500 * time.Millisecond

// silentServer accepts connections and never answers.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	return ln.Addr().String()
}

// garbageServer answers every connection like an HTTP server refusing a bad
// request, then closes it.
func garbageServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Read(make([]byte, 512))
			_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// Connect returns by its deadline against a server that accepts and never
// answers (go-zookeeper alone waits ten times its receive timeout), and
// against one that answers something other than ZooKeeper.
func TestConnectIsBoundedByItsDeadline(t *testing.T) {
	t.Parallel()
	servers := map[string]string{"silent": silentServer(t), "http": garbageServer(t)}
	for name, addr := range servers {
		t.Run(name, func(t *testing.T) {
			const deadline = time.Second
			start := time.Now()
			// With credentials too: they are added under the same deadline.
			_, err := zklock.Connect(ctxTimeout(t, deadline), []string{addr}, zklock.WithDigestAuth("user", "secret"))
			took := time.Since(start)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.Less(t, took, deadline+connectBound, "Connect overran its deadline")
			if name == "http" {
				require.ErrorContains(t, err, "not ZooKeeper's")
			}
		})
	}
}

// Close is bounded while go-zookeeper sits in a handshake with a server that
// accepted the connection and does not answer.
func TestCloseIsBoundedMidHandshake(t *testing.T) {
	t.Parallel()
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	const cleanup = 500 * time.Millisecond
	var states = make(chan zk.State, 100)
	c := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(3*time.Second), zklock.WithCleanupTimeout(cleanup),
		zklock.WithEventHandler(func(ev zk.Event) {
			if ev.Type == zk.EventSession {
				states <- ev.State
			}
		}))
	proxy.Stall()
	proxy.Cut()
	dropped := false
	for s := range states {
		dropped = dropped || s == zk.StateDisconnected
		if dropped && s == zk.StateConnected { // a new connection is open, its handshake held by the proxy
			break
		}
	}
	start := time.Now()
	require.NoError(t, c.Close())
	require.Less(t, time.Since(start), cleanup+connectBound, "Close overran its bound")
	proxy.Resume()
}

// zklock's view of the session must not depend on the user's event handler:
// with a handler stuck from before an expiry until after it (the extreme of
// a slow one, which makes go-zookeeper drop events when its 6-slot channel is
// full), the old leases end and a new session is used.
func TestSlowEventHandlerDoesNotHideTheSession(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	var stuck atomic.Bool
	unstick := make(chan struct{})
	c := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(timeout),
		zklock.WithEventHandler(func(zk.Event) {
			if stuck.Load() {
				<-unstick
			}
		}))
	t.Cleanup(func() { close(unstick) }) // before Close, which waits for the handler
	var leases []*zklock.Lease
	for i := 0; i < 8; i++ {
		m, err := c.NewMutex(lockPath(t))
		require.NoError(t, err)
		l, err := m.Acquire(ctxTimeout(t, 10*time.Second))
		require.NoError(t, err)
		tokenOf(l)
		leases = append(leases, l)
	}
	stuck.Store(true)
	proxy.Stall()
	<-leases[0].Done()
	time.Sleep(2 * timeout) // well past the expiry on the server
	proxy.Resume()
	for _, l := range leases {
		<-l.Done()
		require.ErrorIs(t, l.Err(), zklock.ErrLockLost)
	}

	other, err := c.NewMutex(lockPath(t))
	require.NoError(t, err)
	l2, err := other.Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err, "a new session was established but zklock did not see it")
	require.NoError(t, l2.Release(context.Background()))
}

// When the owner closes the connection under a NewClient, a waiting Acquire
// with no deadline ends with ErrClosed, promptly and without spinning.
func TestCallerClosingConnectionEndsWaits(t *testing.T) {
	p, obs, _, _ := holding(t)
	conn, events := rawConn(t, cluster.Addrs(), testSession)
	c, err := zklock.NewClient(conn, events)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	m, err := c.NewMutex(p)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := m.Acquire(context.Background())
		done <- err
	}()
	waitChildren(t, obs, p, 2)

	cpu, start := cpuTime(), time.Now()
	conn.Close()
	select {
	case err := <-done:
		require.ErrorIs(t, err, zklock.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire went on after its connection was closed")
	}
	used, wall := cpuTime()-cpu, time.Since(start)
	require.Less(t, used, wall/2+200*time.Millisecond, "CPU %v in %v: a hot loop", used, wall)
}

// Close is bounded even when the server cannot be reached: what it cannot
// delete in time goes with the session it closes.
func TestCloseIsBoundedDuringPartition(t *testing.T) {
	t.Parallel()
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
