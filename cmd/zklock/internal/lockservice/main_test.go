package lockservice_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/cmd/zklock/internal/lockservice"
	"github.com/zklock/zklock/zktest"
)

// cluster is the ZooKeeper every test shares, on paths of its own.
var cluster *zktest.Cluster

func TestMain(m *testing.M) {
	if servers := os.Getenv(loadChildEnv); servers != "" {
		os.Exit(loadChildMain(servers)) // BenchmarkServiceLoad's service process
	}
	c, stop, err := zktest.StartMain()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cluster = c
	code := m.Run()
	stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// served is a Service on its own client behind an httptest server.
type served struct {
	url    string
	svc    *lockservice.Service
	client *zklock.Client
	token  string
	httpc  *http.Client // http.DefaultClient when nil
}

func (s *served) httpClient() *http.Client {
	if s.httpc != nil {
		return s.httpc
	}
	return http.DefaultClient
}

// serve starts a service on servers (the shared cluster when nil), its
// client asking for a 4 s session timeout; its streams are ended, and the
// client closed, by t.Cleanup.
func serve(t *testing.T, cfg lockservice.Config, servers ...string) *served {
	t.Helper()
	return serveAsking(t, 4*time.Second, cfg, servers...)
}

// serveAsking is serve with a client asking for the session timeout session.
func serveAsking(t *testing.T, session time.Duration, cfg lockservice.Config, servers ...string) *served {
	t.Helper()
	if servers == nil {
		servers = cluster.Addrs()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := zklock.Connect(ctx, servers, zklock.WithSessionTimeout(session))
	require.NoError(t, err)
	svc, err := lockservice.New(c, cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, svc.Close(ctx))
		srv.Close()
		c.Close()
	})
	s := &served{url: srv.URL, svc: svc, client: c}
	for tok := range cfg.Tokens {
		s.token = tok
	}
	return s
}

var pathSeq atomic.Int64

func lockPath(t *testing.T) string {
	return fmt.Sprintf("/zklock-serve-test/%s-%d/lock", strings.ReplaceAll(t.Name(), "/", "_"), pathSeq.Add(1))
}

// call sends one request and returns the status and the body.
func (s *served) call(t *testing.T, method, route string, body any) (int, []byte) {
	t.Helper()
	resp := s.do(t, method, route, body)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

func (s *served) do(t *testing.T, method, route string, body any) *http.Response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		require.NoError(t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, s.url+route, rd)
	require.NoError(t, err)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := s.httpClient().Do(req)
	require.NoError(t, err)
	return resp
}

// stream is an acquire (or campaign) in flight: its status once answered
// (the answer comes with the grant), then its events as they come.
type stream struct {
	answered chan int // the status, once the answer's headers arrive
	events   chan lockservice.Event
	body     chan io.Closer // the body, once answered
}

// open sends an acquire or campaign without waiting for the answer; its
// events arrive on the stream's channel, closed when the stream ends.
// Closing the stream (leave) is the release.
func (s *served) open(t *testing.T, route string, body any) *stream {
	t.Helper()
	raw, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest("POST", s.url+route, bytes.NewReader(raw))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req = req.WithContext(ctx)
	st := &stream{answered: make(chan int, 1), events: make(chan lockservice.Event, 8), body: make(chan io.Closer, 1)}
	go func() {
		defer close(st.events)
		resp, err := s.httpClient().Do(req)
		if err != nil {
			st.answered <- 0
			st.body <- io.NopCloser(nil)
			return
		}
		defer resp.Body.Close()
		st.answered <- resp.StatusCode
		st.body <- closerFunc(cancel)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var ev lockservice.Event
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				st.events <- ev
			}
		}
	}()
	return st
}

type closerFunc func()

func (f closerFunc) Close() error { f(); return nil }

// leave closes the caller's request: its lock is released (or its wait
// abandoned).
func (st *stream) leave(t *testing.T) {
	t.Helper()
	select {
	case b := <-st.body:
		b.Close()
	case <-time.After(20 * time.Second):
		t.Fatal("no answer within 20s")
	}
}

// status returns the answer's status, failing after 20s.
func (st *stream) status(t *testing.T) int {
	t.Helper()
	select {
	case code := <-st.answered:
		return code
	case <-time.After(20 * time.Second):
		t.Fatal("no answer within 20s")
	}
	return 0
}

// next returns the stream's next event other than a heartbeat, failing
// after 20s.
func (st *stream) next(t *testing.T) lockservice.Event {
	t.Helper()
	for {
		ev := st.nextAny(t)
		if ev.Event != "heartbeat" {
			return ev
		}
	}
}

// nextAny returns the stream's next event, failing after 20s.
func (st *stream) nextAny(t *testing.T) lockservice.Event {
	t.Helper()
	select {
	case ev, ok := <-st.events:
		require.True(t, ok, "the stream ended")
		return ev
	case <-time.After(20 * time.Second):
		t.Fatal("no event on the stream within 20s")
	}
	return lockservice.Event{}
}

// ended waits until the stream has ended, skipping heartbeats; it fails on
// any other event, or after 20s.
func (st *stream) ended(t *testing.T) {
	t.Helper()
	for {
		select {
		case ev, ok := <-st.events:
			if !ok {
				return
			}
			require.Equal(t, "heartbeat", ev.Event, "an event after the stream's end")
		case <-time.After(20 * time.Second):
			t.Fatal("the stream did not end within 20s")
		}
	}
}

// eventually polls cond every 20ms until it holds, failing after 20s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitQueue waits until path has n contenders, as ZooKeeper says.
func waitQueue(t *testing.T, c *zklock.Client, path string, n int) []zklock.Contender {
	t.Helper()
	var cs []zklock.Contender
	eventually(t, fmt.Sprintf("%d contenders on %s", n, path), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		cs, err = c.Contenders(ctx, path)
		return err == nil && len(cs) == n
	})
	return cs
}
