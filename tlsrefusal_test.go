package zklock_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// refusalBound is how soon Connect must give up once every server refused
// for a cause no retry changes: far below the default connect timeout (15 s),
// generous for TLS handshakes with a JVM on a loaded 2-core machine.
const refusalBound = 5 * time.Second

// A server certificate the client does not trust, one not valid for the
// name, and a client certificate the server refuses end Connect at once
// (default connect timeout), with one server or two (the second a proxy to
// the same server), each error naming its cause.
func TestTLSRefusalEndsConnectAtOnce(t *testing.T) {
	t.Parallel()
	tc := zktest.Start(t, zktest.WithTLS("need"))
	proxy := zktest.NewProxy(t, tc.Addrs()...)
	wrongName := tc.TLSConfig()
	wrongName.ServerName = "zk.example.com"
	cases := map[string]struct {
		cfg   *tls.Config
		cause string
	}{
		"untrusted server": {otherCA(t), "not trusted"},
		"name mismatch":    {wrongName, "name mismatch"},
		"client refused":   {caOnly(tc), "refused"},
	}
	for name, tc2 := range cases {
		for _, servers := range [][]string{tc.Addrs(), append(tc.Addrs(), proxy.Addr())} {
			t.Run(fmt.Sprintf("%s/%d servers", name, len(servers)), func(t *testing.T) {
				start := time.Now()
				c, err := zklock.Connect(context.Background(), servers, zklock.WithTLS(tc2.cfg))
				took := time.Since(start)
				if err == nil {
					c.Close()
					t.Fatal("Connect succeeded; want an error")
				}
				t.Logf("%d server(s), after %v: %v", len(servers), took.Round(time.Millisecond), err)
				require.ErrorIs(t, err, zklock.ErrUnreachable)
				require.ErrorContains(t, err, tc2.cause)
				require.ErrorContains(t, err, "retrying cannot change")
				require.Less(t, took, refusalBound, "Connect waited for the connect timeout")
			})
		}
	}
}

// A server that fails for a cause a retry may change (here a refused port)
// keeps Connect trying the others until the connect timeout.
func TestTLSRefusalWaitsWhileAServerMayRecover(t *testing.T) {
	t.Parallel()
	tc := zktest.Start(t, zktest.WithTLS("none"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refused := ln.Addr().String()
	ln.Close()
	const timeout = 2 * time.Second
	start := time.Now()
	_, err = zklock.Connect(context.Background(), append(tc.Addrs(), refused),
		zklock.WithTLS(otherCA(t)), zklock.WithConnectTimeout(timeout))
	took := time.Since(start)
	t.Logf("after %v: %v", took.Round(time.Millisecond), err)
	require.ErrorIs(t, err, zklock.ErrUnreachable)
	require.NotContains(t, err.Error(), "retrying cannot change")
	require.GreaterOrEqual(t, took, timeout)
}
