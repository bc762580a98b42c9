package lockservice_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock/cmd/zklock/internal/lockservice"
)

// idleProxy forwards TCP connections to target and cuts a connection on
// which nothing has passed, either way, for idle: the model of nginx's
// proxy_read_timeout (60 s), a load balancer's idle timeout, or Node's
// fetch body timeout (300 s), shortened. It returns the proxy's address.
func idleProxy(t *testing.T, target string, idle time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	done := make(chan struct{})
	t.Cleanup(func() { close(done); ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			var last atomic.Int64
			last.Store(time.Now().UnixNano())
			cut := sync.OnceFunc(func() { in.Close(); out.Close() })
			pipe := func(dst, src net.Conn) {
				defer wg.Done()
				defer cut()
				buf := make([]byte, 4096)
				for {
					n, err := src.Read(buf)
					if n > 0 {
						last.Store(time.Now().UnixNano())
						if _, werr := dst.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}
			wg.Add(3)
			go pipe(out, in)
			go pipe(in, out)
			go func() {
				defer wg.Done()
				tick := time.NewTicker(idle / 10)
				defer tick.Stop()
				for {
					select {
					case <-done:
						cut()
						return
					case <-tick.C:
						if time.Since(time.Unix(0, last.Load())) > idle {
							cut()
							return
						}
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// throughProxy is s as a caller behind an idle proxy sees it, with a client
// that gives up on headers that take longer than idle (as Node's fetch does
// after 300 s).
func throughProxy(t *testing.T, s *served, idle time.Duration) *served {
	t.Helper()
	p := *s
	p.url = "http://" + idleProxy(t, strings.TrimPrefix(s.url, "http://"), idle)
	tr := &http.Transport{ResponseHeaderTimeout: idle, DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	p.httpc = &http.Client{Transport: tr}
	return &p
}

// TestHeartbeatsKeepStreamsThroughAnIdleTimeout: behind a proxy that cuts
// connections idle for 600ms and a client that waits 600ms at most for
// headers, a holder holds for 4 idle timeouts, a waiter waits as long and
// is granted, and a watch stays open; with a heartbeat longer than the idle
// timeout, the proxy cuts the holder's stream and its lock is released
// (the proxy is a real one).
func TestHeartbeatsKeepStreamsThroughAnIdleTimeout(t *testing.T) {
	t.Parallel()
	const idle = 600 * time.Millisecond // 6 heartbeats: room for a loaded machine
	s := serve(t, lockservice.Config{Heartbeat: 100 * time.Millisecond})
	px := throughProxy(t, s, idle)
	p := lockPath(t)

	watch := px.do(t, "GET", "/v1/election/watch?path="+p, nil)
	defer watch.Body.Close()
	require.Equal(t, "no", watch.Header.Get("X-Accel-Buffering"))
	require.Equal(t, "100ms", watch.Header.Get(lockservice.HeartbeatHeader))
	comments := make(chan string, 64)
	go func() {
		defer close(comments)
		b := make([]byte, 4096)
		for {
			n, err := watch.Body.Read(b)
			if n > 0 {
				comments <- string(b[:n])
			}
			if err != nil {
				return
			}
		}
	}()

	a := px.open(t, "/v1/lock/acquire", lockservice.AcquireRequest{Path: p})
	require.Equal(t, http.StatusOK, a.status(t))
	granted := a.next(t)
	require.Equal(t, "granted", granted.Event)
	b := px.open(t, "/v1/lock/acquire", lockservice.AcquireRequest{Path: p})
	require.Equal(t, http.StatusOK, b.status(t), "the waiter's headers come at once")
	waitQueue(t, s.client, p, 2)

	held := time.Now()
	beats := 0
	for time.Since(held) < 4*idle {
		ev := a.nextAny(t)
		require.Equal(t, "heartbeat", ev.Event)
		beats++
	}
	require.GreaterOrEqual(t, beats, 8, "a heartbeat every 100ms")
	for time.Since(held) < 5*idle { // the waiter's stream beats too
		require.Equal(t, "heartbeat", b.nextAny(t).Event)
	}
	waitQueue(t, s.client, p, 2) // both still there after 5 idle timeouts

	code, body := px.call(t, "POST", "/v1/lock/release", lockservice.ReleaseRequest{ID: granted.ID})
	require.Equal(t, http.StatusOK, code, string(body))
	require.Equal(t, "released", a.next(t).Event)
	bGranted := b.next(t)
	require.Equal(t, "granted", bGranted.Event)
	require.Greater(t, bGranted.Token, granted.Token)
	b.leave(t)
	waitQueue(t, s.client, p, 0)

	var got strings.Builder
	for !strings.Contains(got.String(), ": heartbeat\n\n") || time.Since(held) < 6*idle {
		select {
		case c, ok := <-comments:
			require.True(t, ok, "the watch ended after %v: %q", time.Since(held), got.String())
			got.WriteString(c)
		case <-time.After(5 * time.Second):
			t.Fatal("the watch fell silent")
		}
	}
	require.Contains(t, got.String(), "event: leader")

	// Without heartbeats inside the idle timeout, the proxy cuts the stream
	// and the service releases the lock: the proxy is real.
	slow := throughProxy(t, serve(t, lockservice.Config{Heartbeat: time.Hour}), idle)
	q := lockPath(t)
	c := slow.open(t, "/v1/lock/acquire", lockservice.AcquireRequest{Path: q})
	require.Equal(t, "granted", c.next(t).Event)
	waitQueue(t, s.client, q, 0)
}

// TestHeartbeatFindsACallerThatStoppedReading: a shell script holds with
// curl in a pipeline and its reader ends after the grant (the issue's
// `curl … | { read -r g; ./job; }`). curl notices only when it writes: the
// next heartbeat kills it with SIGPIPE, and the service releases the lock
// at once. With no heartbeat due, the lock stays held: the script would
// hold it for ever.
func TestHeartbeatFindsACallerThatStoppedReading(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is not installed (no curl in $PATH): this test drives it; make interop (scripts/install-interop.sh) installs it")
	}
	run := func(t *testing.T, heartbeat time.Duration) (*served, string, *exec.Cmd, string) {
		s := serve(t, lockservice.Config{Heartbeat: heartbeat})
		p := lockPath(t)
		got := filepath.Join(t.TempDir(), "granted")
		script := `curl -sSN -H 'Content-Type: application/json' -d '{"path":"` + p + `"}' ` + s.url + `/v1/lock/acquire | { read -r g; echo "$g" > ` + got + `; }`
		sh := exec.Command("sh", "-c", script)
		sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // killed with its curl
		require.NoError(t, sh.Start())
		return s, p, sh, got
	}

	s, p, sh, got := run(t, 200*time.Millisecond)
	// The grant line read is the proof of the hold (its node lives from the
	// grant to the next heartbeat, 200 ms: a poll of the queue on a loaded
	// machine missed it).
	eventually(t, "the grant read", func() bool { b, _ := os.ReadFile(got); return strings.Contains(string(b), `"granted"`) })
	read := time.Now()
	require.NoError(t, sh.Wait(), "the pipeline ends once curl does")
	waitQueue(t, s.client, p, 0)
	t.Logf("released %v after the reader ended (heartbeat 200ms)", time.Since(read))
	require.Less(t, time.Since(read), 3*time.Second)

	// A waiter whose reader ended after its first heartbeat: its wait is
	// abandoned at the next one, its queue node gone.
	s, p = serve(t, lockservice.Config{Heartbeat: 200 * time.Millisecond}), lockPath(t)
	m, err := s.client.NewMutex(p)
	require.NoError(t, err)
	lease, err := m.Acquire(context.Background())
	require.NoError(t, err)
	defer func() { _ = lease.Release(context.Background()) }()
	got = filepath.Join(t.TempDir(), "heartbeat")
	waiter := exec.Command("sh", "-c", `curl -sSN -H 'Content-Type: application/json' -d '{"path":"`+p+`"}' `+s.url+`/v1/lock/acquire | { read -r g; echo "$g" > `+got+`; }`)
	waiter.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, waiter.Start())
	waitQueue(t, s.client, p, 2)
	eventually(t, "a heartbeat read", func() bool { b, _ := os.ReadFile(got); return strings.Contains(string(b), `"heartbeat"`) })
	require.NoError(t, waiter.Wait(), "the pipeline ends once curl does")
	waitQueue(t, s.client, p, 1)

	s, p, sh, got = run(t, time.Hour)
	waitQueue(t, s.client, p, 1)
	eventually(t, "the grant read", func() bool { b, _ := os.ReadFile(got); return strings.Contains(string(b), `"granted"`) })
	ended := make(chan error, 1)
	go func() { ended <- sh.Wait() }()
	select {
	case err := <-ended:
		t.Fatalf("the pipeline ended without a heartbeat: %v", err)
	case <-time.After(time.Second):
	}
	waitQueue(t, s.client, p, 1) // still held: nothing told curl its reader left
	require.NoError(t, syscall.Kill(-sh.Process.Pid, syscall.SIGKILL))
	err = <-ended
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "%v", err)
	waitQueue(t, s.client, p, 0)
}
