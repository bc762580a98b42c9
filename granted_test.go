package zklock_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// Tests against a server that grants less than the client asks (issue 27,
// row 2): every figure derived from the session timeout must use the granted
// one. The client asks for the default 10 s; the server grants at most 2 s.

const grantedMax = 2 * time.Second

// smallGrant starts a server of its own whose maximum session timeout is
// grantedMax, a client on a proxy in front of it asking for the default
// session timeout ask, and an observer.
func smallGrant(t *testing.T, ask time.Duration, opts ...zklock.Option) (*zktest.Cluster, *zktest.Proxy, *zklock.Client, *zk.Conn) {
	t.Helper()
	zc := zktest.Start(t, zktest.WithMaxSessionTimeout(grantedMax))
	proxy := zktest.NewProxy(t, zc.Addrs()...)
	c := connectVia(t, []string{proxy.Addr()}, append([]zklock.Option{zklock.WithSessionTimeout(ask)}, opts...)...)
	obs := zktest.Connect(t, zc.Addrs(), 10*time.Second)
	return zc, proxy, c, obs.Conn
}

type grantAt struct {
	l   *zklock.Lease
	err error
	at  time.Time
}

// requireLossBeforeNextGrant queues a waiter (another client) behind the
// held lease l, cuts l's client off with a stall until the server expires its
// session, and requires l's Done to have closed by the time the waiter is
// granted. It returns the waiter's lease; the proxy is left stalled.
func requireLossBeforeNextGrant(t *testing.T, proxy *zktest.Proxy, obs *zk.Conn, l *zklock.Lease, waiter *zklock.Mutex, p string) *zklock.Lease {
	t.Helper()
	granted := make(chan grantAt, 1)
	go func() {
		w, err := waiter.Acquire(ctxTimeout(t, 20*time.Second))
		granted <- grantAt{w, err, time.Now()}
	}()
	waitChildren(t, obs, p, 2)
	proxy.Stall()
	cut := time.Now()
	var doneAt time.Time
	for doneAt.IsZero() {
		select {
		case <-l.Done():
			doneAt = time.Now()
		case g := <-granted:
			require.NoError(t, g.err)
			select {
			case <-l.Done():
				doneAt = time.Now() // closed in the same instant: order unknown, not late
				granted <- g
			default:
				t.Fatalf("the waiter was granted %v after the cut while the old holder's Done was still open: two holders", g.at.Sub(cut).Round(time.Millisecond))
			}
		}
	}
	g := <-granted
	require.NoError(t, g.err)
	require.ErrorIs(t, l.Err(), zklock.ErrLockLost)
	t.Logf("after the cut: Done closed at %v, the next holder granted at %v (granted timeout %v)",
		doneAt.Sub(cut).Round(time.Millisecond), g.at.Sub(cut).Round(time.Millisecond), grantedMax)
	return g.l
}

// A lease lost to an expiry is reported before the server lets the next
// holder in: right after Connect (the loss clock's first nap), and again
// after a loss (its nap after a tick that found the deadline passed). The
// second round is cut about 1.7 s after the first loss, so only an ask of
// 30 s (a nap of 10 s) leaves that nap asleep past its deadline.
func TestGrantedLossBeforeTheNextHolder(t *testing.T) {
	t.Parallel()
	for _, ask := range []time.Duration{zklock.DefaultSessionTimeout, 30 * time.Second} {
		t.Run(ask.String(), func(t *testing.T) {
			zc, proxy, c, obs := smallGrant(t, ask)
			other := connectVia(t, zc.Addrs())
			p := lockPath(t)
			m, w := mustMutex(t, c, p), mustMutex(t, other, p)
			for round := 1; round <= 2; round++ {
				t.Logf("round %d", round)
				l, err := m.Acquire(ctxTimeout(t, 20*time.Second))
				require.NoError(t, err)
				tokenOf(l)
				next := requireLossBeforeNextGrant(t, proxy, obs, l, w, p)
				require.NoError(t, next.Release(context.Background()))
				proxy.Resume()
			}
		})
	}
}

// Release, Multi and Token with context.Background() return by the loss
// deadline of the granted timeout (80 % of it after the last word from the
// server), not of the asked one, on a client cut off right after Connect.
// Token answers at once when the create's reply gave it, as it usually does.
func TestGrantedBoundsWhenCutOff(t *testing.T) {
	t.Parallel()
	for _, call := range []struct {
		name string
		do   func(l *zklock.Lease) error
	}{
		{"Release", func(l *zklock.Lease) error { return l.Release(context.Background()) }},
		{"Multi", func(l *zklock.Lease) error {
			_, err := l.Multi(context.Background(), &zk.CheckVersionRequest{Path: l.Node(), Version: -1})
			return err
		}},
		{"Token", func(l *zklock.Lease) error {
			if _, err := l.Token(context.Background()); err != nil {
				return err
			}
			return zklock.ErrLockLost // known without a read: nothing to bound
		}},
	} {
		t.Run(call.name, func(t *testing.T) {
			zc := zktest.Start(t, zktest.WithMaxSessionTimeout(grantedMax))
			proxy := zktest.NewProxy(t, zc.Addrs()...)
			c := connectVia(t, []string{proxy.Addr()}, zklock.WithOwnNodeWatch(false)) // Token reads
			l, err := mustMutex(t, c, lockPath(t)).Acquire(ctxTimeout(t, 10*time.Second))
			require.NoError(t, err)
			proxy.Stall()
			defer proxy.Resume()
			start := time.Now()
			err = call.do(l)
			took := time.Since(start)
			require.Error(t, err) // a Multi may end first on the dropped connection: outcome unknown
			require.Less(t, took, grantedMax*8/10+boundSlack, "%s overran the loss deadline of the granted timeout", call.name)
			t.Logf("%s returned %v after the cut", call.name, took.Round(time.Millisecond))
		})
	}
}

// Contact that resumes on the same session after the loss deadline passed
// (no event announces it: the connection never dropped) is reported as
// reconnected within a third of the granted timeout, not of the asked one.
// A follower lag of 0.39 s puts the deadline (1.21 s after the last answer)
// before go-zookeeper's read timeout (1.33 s), so a stall healed as soon as
// the client reports lost keeps the connection.
func TestGrantedReconnectedAfterLostReportedPromptly(t *testing.T) {
	t.Parallel()
	_, proxy, c, _ := smallGrant(t, zklock.DefaultSessionTimeout, zklock.WithFollowerLag(390*time.Millisecond))
	states := c.StateChanges(ctxTimeout(t, 30*time.Second))
	require.Equal(t, zklock.StateConnected, nextState(t, states))
	proxy.Stall()
	require.Equal(t, zklock.StateLost, nextState(t, states))
	proxy.Resume()
	resumed := time.Now()
	require.Equal(t, zklock.StateReconnected, nextState(t, states), "the connection dropped: healed too late to test")
	took := time.Since(resumed)
	require.Less(t, took, grantedMax/3+boundSlack, "reconnected reported late")
	t.Logf("reconnected reported %v after contact could resume", took.Round(time.Millisecond))
}

// SessionTimeout is the timeout the server granted, not the one asked for;
// on a client built by NewClient (no handshake seen) it is the one asked for.
func TestGrantedSessionTimeout(t *testing.T) {
	t.Parallel()
	zc := zktest.Start(t, zktest.WithMaxSessionTimeout(grantedMax))
	c := connectVia(t, zc.Addrs(), zklock.WithSessionTimeout(zklock.DefaultSessionTimeout))
	require.Equal(t, grantedMax, c.SessionTimeout())

	conn, events := rawConn(t, zc.Addrs(), zklock.DefaultSessionTimeout)
	nc, err := zklock.NewClient(conn, events, zklock.WithSessionTimeout(7*time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	require.Equal(t, 7*time.Second, nc.SessionTimeout())
}
