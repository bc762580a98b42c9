package zklock_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/internal/zkserver"
	"github.com/zklock/zklock/zktest"
)

// tlsConnectBound is the connect timeout of the failing TLS connects: the
// error must come within it (plus about a second to close the attempt).
const tlsConnectBound = 4 * time.Second

// connectTLS opens a Client on a TLS cluster with cfg, closed when the test ends.
func connectTLS(t testing.TB, c *zktest.Cluster, cfg *tls.Config, opts ...zklock.Option) *zklock.Client {
	t.Helper()
	opts = append([]zklock.Option{zklock.WithTLS(cfg), zklock.WithSessionTimeout(testSession)}, opts...)
	return connectVia(t, c.Addrs(), opts...)
}

// connectFails connects with opts and the bound, and returns the error,
// which must come within the bound.
func connectFails(t testing.TB, addrs []string, opts ...zklock.Option) error {
	t.Helper()
	opts = append([]zklock.Option{zklock.WithConnectTimeout(tlsConnectBound)}, opts...)
	start := time.Now()
	c, err := zklock.Connect(context.Background(), addrs, opts...)
	took := time.Since(start)
	if err == nil {
		c.Close()
		t.Fatalf("Connect succeeded; want an error")
	}
	t.Logf("after %v: %v", took.Round(time.Millisecond), err)
	require.ErrorIs(t, err, zklock.ErrUnreachable)
	require.Less(t, took, tlsConnectBound+2*time.Second, "Connect outlived its bound")
	return err
}

// otherCA is a tls.Config trusting a CA that signed nothing the server has.
func otherCA(t testing.TB) *tls.Config {
	t.Helper()
	m, err := zkserver.NewTLSMaterial(t.TempDir(), "stranger")
	require.NoError(t, err)
	return &tls.Config{RootCAs: m.Roots, Certificates: []tls.Certificate{m.ClientCert}}
}

// caOnly trusts c's CA and presents no client certificate.
func caOnly(c *zktest.Cluster) *tls.Config {
	cfg := c.TLSConfig()
	cfg.Certificates = nil
	return cfg
}

// TestTLS runs the mutex over a TLS-only client port (ssl.clientAuth=none),
// and the ways a TLS connect fails, each named and within the bound.
func TestTLS(t *testing.T) {
	t.Parallel()
	tc := zktest.Start(t, zktest.WithTLS("none"))

	t.Run("mutex", func(t *testing.T) {
		c := connectTLS(t, tc, caOnly(tc))
		p := lockPath(t)
		m := mustMutex(t, c, p)
		l, err := m.Acquire(ctxTimeout(t, 10*time.Second))
		require.NoError(t, err)
		tok, err := l.Token(ctxTimeout(t, 5*time.Second))
		require.NoError(t, err)
		require.Positive(t, tok)
		require.NoError(t, l.Release(ctxTimeout(t, 5*time.Second)))
	})

	t.Run("handoff", func(t *testing.T) {
		a := connectTLS(t, tc, caOnly(tc))
		b := connectTLS(t, tc, caOnly(tc))
		p := lockPath(t)
		la, err := mustMutex(t, a, p).Acquire(ctxTimeout(t, 10*time.Second))
		require.NoError(t, err)
		got := make(chan error, 1)
		var lb *zklock.Lease
		go func() {
			var err error
			lb, err = mustMutex(t, b, p).Acquire(ctxTimeout(t, 20*time.Second))
			got <- err
		}()
		// b queues behind a; a's release hands the lock over.
		eventually(t, "b queued", func() bool {
			cs, err := a.Contenders(ctxTimeout(t, 5*time.Second), p)
			return err == nil && len(cs) == 2
		})
		select {
		case err := <-got:
			t.Fatalf("b acquired while a held: %v", err)
		default:
		}
		released := time.Now()
		require.NoError(t, la.Release(ctxTimeout(t, 5*time.Second)))
		require.NoError(t, <-got)
		t.Logf("hand-off over TLS took %v", time.Since(released).Round(time.Millisecond))
		require.NoError(t, lb.Release(ctxTimeout(t, 5*time.Second)))
	})

	// A holder whose TLS connection stalls learns of the loss before
	// another client (over TLS too) is granted the lock: the loss clock
	// reads the frames under TLS.
	t.Run("lease lost by stall", func(t *testing.T) {
		const timeout = 1500 * time.Millisecond
		p := lockPath(t)
		proxy := zktest.NewProxy(t, tc.Addrs()...)
		holder := connectVia(t, []string{proxy.Addr()}, zklock.WithTLS(caOnly(tc)), zklock.WithSessionTimeout(timeout))
		l, err := mustMutex(t, holder, p).Acquire(ctxTimeout(t, 10*time.Second))
		require.NoError(t, err)
		other := connectTLS(t, tc, caOnly(tc))
		acquired := make(chan time.Time, 1)
		go func() {
			ol, err := mustMutex(t, other, p).Acquire(ctxTimeout(t, 30*time.Second))
			at := time.Now()
			if err == nil {
				err = ol.Release(ctxTimeout(t, 5*time.Second))
			}
			if err != nil {
				t.Errorf("other: %v", err)
			}
			acquired <- at
		}()
		eventually(t, "other queued", func() bool {
			cs, err := other.Contenders(ctxTimeout(t, 5*time.Second), p)
			return err == nil && len(cs) == 2
		})
		proxy.Stall()
		stalled := time.Now()
		<-l.Done()
		doneAt := time.Now()
		otherAt := <-acquired
		proxy.Resume()
		require.ErrorIs(t, l.Err(), zklock.ErrLockLost)
		require.True(t, doneAt.Before(otherAt), "holder learned of the loss %v after the other acquired", doneAt.Sub(otherAt))
		t.Logf("session %v over TLS: lease lost %v after the stall, %v before the next holder",
			timeout, doneAt.Sub(stalled).Round(time.Millisecond), otherAt.Sub(doneAt).Round(time.Millisecond))
	})

	t.Run("wrong CA", func(t *testing.T) {
		err := connectFails(t, tc.Addrs(), zklock.WithTLS(otherCA(t)))
		require.ErrorContains(t, err, "not trusted")
		var unknown x509.UnknownAuthorityError
		require.True(t, errors.As(err, &unknown), "the x509 error is wrapped")
	})

	t.Run("wrong name", func(t *testing.T) {
		cfg := caOnly(tc)
		cfg.ServerName = "zk.example.com"
		err := connectFails(t, tc.Addrs(), zklock.WithTLS(cfg))
		require.ErrorContains(t, err, "name mismatch")
		require.ErrorContains(t, err, "zk.example.com")
	})

	t.Run("plain client on TLS port", func(t *testing.T) {
		err := connectFails(t, tc.Addrs())
		require.ErrorContains(t, err, "TLS")
	})

	// A server that accepts and never answers the hello cannot hold the
	// handshake past Connect's bound.
	t.Run("silent server", func(t *testing.T) {
		err := connectFails(t, []string{silentServer(t)}, zklock.WithTLS(caOnly(tc)))
		require.ErrorContains(t, err, "TLS handshake")
	})

	t.Run("TLS client on plain port", func(t *testing.T) {
		err := connectFails(t, cluster.Addrs(), zklock.WithTLS(caOnly(tc)))
		require.ErrorContains(t, err, "TLS")
	})
}

// TestTLSMutual: with ssl.clientAuth=need the server refuses a client
// without a certificate (the error says so), and serves one with it.
func TestTLSMutual(t *testing.T) {
	t.Parallel()
	tc := zktest.Start(t, zktest.WithTLS("need"))

	err := connectFails(t, tc.Addrs(), zklock.WithTLS(caOnly(tc)))
	require.ErrorContains(t, err, "refused")

	c := connectTLS(t, tc, tc.TLSConfig())
	l, err := mustMutex(t, c, lockPath(t)).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	require.NoError(t, l.Release(ctxTimeout(t, 5*time.Second)))
}

// ZooKeeper's x509 scheme: with mutual TLS, the client certificate's subject
// is the session's identity, so nodes created with an "auth" ACL belong to
// it. Another certificate from the same CA (a stranger) lists the queue,
// but can neither delete the holder's node nor queue on the path.
func TestTLSX509Identity(t *testing.T) {
	t.Parallel()
	tc := zktest.Start(t, zktest.WithTLS("need"))
	protected := zklock.WithACL([]zk.ACL{
		{Perms: zk.PermAll, Scheme: "auth"},
		{Perms: zk.PermRead, Scheme: "world", ID: "anyone"},
	})
	owner := connectTLS(t, tc, tc.TLSConfig(), protected)
	p := lockPath(t)
	l, err := mustMutex(t, owner, p).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	for _, node := range []string{p, l.Node()} {
		acl, _, err := owner.Conn().GetACL(node)
		require.NoError(t, err)
		require.Equal(t, []zk.ACL{
			{Perms: zk.PermAll, Scheme: "x509", ID: "CN=" + tc.TLSFiles().ClientName},
			{Perms: zk.PermRead, Scheme: "world", ID: "anyone"},
		}, acl, node)
	}

	cfg, files, err := tc.NewClientCert("stranger")
	require.NoError(t, err)
	require.Equal(t, "stranger", files.ClientName)
	stranger := connectTLS(t, tc, cfg, protected)
	cs, err := stranger.Contenders(ctxTimeout(t, 5*time.Second), p)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	require.ErrorIs(t, stranger.Conn().Delete(l.Node(), -1), zk.ErrNoAuth)
	_, err = mustMutex(t, stranger, p).TryAcquire(ctxTimeout(t, 5*time.Second))
	require.ErrorIs(t, err, zk.ErrNoAuth)
	require.ErrorContains(t, err, p)

	require.NoError(t, l.Release(ctxTimeout(t, 5*time.Second)))
	_, err = mustMutex(t, stranger, p).TryAcquire(ctxTimeout(t, 5*time.Second))
	require.ErrorIs(t, err, zk.ErrNoAuth, "the path stays the owner's")
}

// zktest's Mntr speaks TLS to a TLS cluster: request and watch counts can be
// measured there too (a held lock's own-node watch is one watch).
func TestTLSMntr(t *testing.T) {
	t.Parallel()
	tc := zktest.Start(t, zktest.WithTLS("need"))
	before, err := tc.Mntr(0)
	require.NoError(t, err)
	c := connectTLS(t, tc, tc.TLSConfig())
	l, err := mustMutex(t, c, lockPath(t)).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	<-zklock.OwnReadDone(l)
	after, err := tc.Mntr(0)
	require.NoError(t, err)
	require.Greater(t, after.PacketsReceived(), before.PacketsReceived())
	require.Equal(t, int64(1), after.WatchCount())
	require.NoError(t, l.Release(ctxTimeout(t, 5*time.Second)))
}
