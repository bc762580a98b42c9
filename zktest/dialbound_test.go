package zktest_test

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock/zktest"
)

// A server that accepts a connection and never answers its handshake (a
// ZooKeeper 3.8 restarted a moment ago does this) costs Connect's client a
// third of the session timeout, not go-zookeeper's 6.7 timeouts: it dials
// again and gets its session. Here the first connection is held silent and
// later ones reach the server.
func TestConnectRedialsAServerSilentAtTheHandshake(t *testing.T) {
	c := zktest.Start(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	accepted := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted++
			if accepted == 1 {
				t.Cleanup(func() { conn.Close() }) // silent until the test ends
				continue
			}
			wg.Add(1)
			go func() { defer wg.Done(); pipe(conn, c.Addrs()[0]) }()
		}
	}()
	const T = 6 * time.Second
	start := time.Now()
	cli := zktest.Connect(t, []string{ln.Addr().String()}, T)
	took := time.Since(start)
	require.Less(t, took, T, "a session after %v", took)
	_, _, err = cli.Exists("/")
	require.NoError(t, err)
	t.Logf("session after %v (the bound: %v)", took.Round(time.Millisecond), T/3)
}

// pipe joins conn to the server at addr until either side closes.
func pipe(conn net.Conn, addr string) {
	defer conn.Close()
	up, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, conn); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, up); done <- struct{}{} }()
	<-done
}
