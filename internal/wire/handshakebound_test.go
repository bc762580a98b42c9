package wire

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// silentServer accepts connections and never answers them (as ZooKeeper 3.8
// can, starting up); it keeps them open until the test ends.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// A reconnect whose connect request is never answered is closed after a
// third of the granted session timeout, so go-zookeeper dials again before
// the session can expire; without the bound its read waits 6.7 timeouts.
// The client is told of the silence, not of a closed connection.
func TestPureHandshakeBoundClosesASilentReconnect(t *testing.T) {
	w := New(Config{})
	t.Cleanup(w.Shutdown)
	w.granted = 600 * time.Millisecond // a session was granted: this is a reconnect
	c, err := w.Dial("tcp", silentServer(t), 50*time.Millisecond)
	require.NoError(t, err)
	defer c.Close()
	start := time.Now()
	_, err = c.Write(make([]byte, 48)) // the connect request
	require.NoError(t, err)
	_, err = c.Read(make([]byte, 4))
	require.Error(t, err, "the silent connection is closed")
	took := time.Since(start)
	require.GreaterOrEqual(t, took, 150*time.Millisecond, "not before the bound")
	require.Less(t, took, 5*time.Second, "a third of 600ms, not 6.7 timeouts")
	require.ErrorIs(t, w.lastError(), errSilent)
}

// An answered handshake is left alone.
func TestPureHandshakeBoundSparesAnAnsweredConnection(t *testing.T) {
	w := New(Config{})
	t.Cleanup(w.Shutdown)
	w.granted = 300 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	served := make(chan net.Conn, 1)
	go func() {
		s, err := ln.Accept()
		if err == nil {
			served <- s
		}
	}()
	c, err := w.Dial("tcp", ln.Addr().String(), 50*time.Millisecond)
	require.NoError(t, err)
	defer c.Close()
	s := <-served
	defer s.Close()
	_, err = c.Write(make([]byte, 48))
	require.NoError(t, err)
	_, err = s.Write(connectResponse(300, 7))
	require.NoError(t, err)
	_, err = c.Read(make([]byte, 64))
	require.NoError(t, err)
	time.Sleep(300 * time.Millisecond) // past the bound (100 ms)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(50*time.Millisecond)))
	_, err = c.Read(make([]byte, 4))
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	require.True(t, ne.Timeout(), "still open, nothing to read: %v", err)
}
