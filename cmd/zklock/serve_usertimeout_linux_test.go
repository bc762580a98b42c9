package main

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestServeUserTimeoutInherited: the connections accepted on serve's
// listener carry TCP_USER_TIMEOUT, set on the listening socket.
func TestServeUserTimeoutInherited(t *testing.T) {
	t.Parallel()
	ln, err := listenTCP("127.0.0.1:0", userTimeout)
	require.NoError(t, err)
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	sc, err := ln.Accept()
	require.NoError(t, err)
	defer sc.Close()
	raw, err := sc.(*net.TCPConn).SyscallConn()
	require.NoError(t, err)
	var got int
	require.NoError(t, raw.Control(func(fd uintptr) {
		got, err = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout)
	}))
	require.NoError(t, err)
	require.Equal(t, int(userTimeout.Milliseconds()), got)
}

// TestServeUserTimeoutVanishedPeer: a caller whose host vanishes (no FIN,
// nothing acknowledged any more) while the service writes a heartbeat
// every 100ms is found by TCP_USER_TIMEOUT (shortened to 1s here), while a
// connection without it stays open: Linux sends no keep-alive probe while
// sent data is unacknowledged. It runs in a network namespace of its own
// (unshare -rn, no root needed), whose loopback it takes down to make the
// caller vanish.
func TestServeUserTimeoutVanishedPeer(t *testing.T) {
	t.Parallel()
	if os.Getenv(netnsChild) == "" {
		if err := exec.Command("unshare", "-rn", "true").Run(); err != nil {
			t.Skipf("no user and network namespaces here (unshare -rn: %v)", err)
		}
		cmd := exec.Command("unshare", "-rn", os.Args[0], "-test.run", "^TestServeUserTimeoutVanishedPeer$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), netnsChild+"=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		t.Logf("in a network namespace:\n%s", out)
		require.Contains(t, string(out), "--- PASS: TestServeUserTimeoutVanishedPeer")
		return
	}
	require.NoError(t, exec.Command("ip", "link", "set", "lo", "up").Run())
	// held opens a connection to a listener and writes a heartbeat every
	// 100ms on the accepted side, as a stream does; the channel says when
	// (and how) the service side found the caller gone.
	held := func(ut time.Duration) (chan error, func()) {
		ln, err := listenTCP("127.0.0.1:0", ut)
		require.NoError(t, err)
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, KeepAlive: -1}
		c, err := d.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		sc, err := ln.Accept()
		require.NoError(t, err)
		ended := make(chan error, 2)
		go func() { // the server's background read, as net/http's
			_, err := sc.Read(make([]byte, 1))
			ended <- err
		}()
		go func() {
			for {
				if _, err := sc.Write([]byte(`{"event":"heartbeat"}` + "\n")); err != nil {
					ended <- err
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
		return ended, func() { sc.Close(); c.Close(); ln.Close() }
	}
	bounded, stop1 := held(time.Second)
	defer stop1()
	unbounded, stop2 := held(0)
	defer stop2()
	time.Sleep(300 * time.Millisecond) // heartbeats flow, acknowledged

	require.NoError(t, exec.Command("ip", "link", "set", "lo", "down").Run()) // the caller's host vanishes
	vanished := time.Now()
	select {
	case err := <-bounded:
		took := time.Since(vanished)
		t.Logf("found gone after %v: %v", took, err)
		require.True(t, errors.Is(err, syscall.ETIMEDOUT), "%v", err)
		require.Less(t, took, 4*time.Second)
	case <-time.After(10 * time.Second):
		t.Fatal("the connection with TCP_USER_TIMEOUT 1s was not ended within 10s of its peer vanishing")
	}
	select {
	case err := <-unbounded:
		t.Fatalf("the connection without TCP_USER_TIMEOUT ended too: %v (the test does not show the difference)", err)
	default:
	}
}
