package lockservice_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/cmd/zklock/internal/lockservice"
)

// loadWorker is one caller of BenchmarkServiceLoad.
type loadWorker interface {
	kind() string
	// cycle takes the lock and releases it, calling held in between, and
	// returns how long the take waited (from the call to the grant).
	cycle(ctx context.Context, held func()) (time.Duration, error)
	close(ctx context.Context) // ends its lease, if any, and its connections
}

// libWorker takes its lock through the library, on the client it shares
// with every other library worker (the service, too, has one session).
type libWorker struct{ m *zklock.Mutex }

func (w *libWorker) kind() string          { return "library" }
func (w *libWorker) close(context.Context) {}

func (w *libWorker) cycle(ctx context.Context, held func()) (time.Duration, error) {
	t0 := time.Now()
	l, err := w.m.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	wait := time.Since(t0)
	held()
	return wait, l.Release(ctx)
}

// newCallerHTTP is one caller's HTTP client: connections of its own, kept
// alive between its requests, as a separate program's would be.
func newCallerHTTP() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2, DisableCompression: true}}
}

// streamWorker holds as the Python and Node clients do: an acquire stream,
// a release by id once granted, and the stream read to its "released".
type streamWorker struct {
	hc        *http.Client
	url, path string
}

func (w *streamWorker) kind() string { return "stream" }

func (w *streamWorker) close(context.Context) { w.hc.CloseIdleConnections() }

func (w *streamWorker) cycle(ctx context.Context, held func()) (time.Duration, error) {
	t0 := time.Now()
	resp, rd, ev, err := w.open(ctx)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	wait := time.Since(t0)
	held()
	return wait, w.release(ctx, rd, ev.ID)
}

// open sends the acquire and reads its stream up to the grant.
func (w *streamWorker) open(ctx context.Context) (*http.Response, *bufio.Reader, lockservice.Event, error) {
	resp, err := loadPost(ctx, w.hc, w.url+"/v1/lock/acquire", lockservice.AcquireRequest{Path: w.path, Timeout: "10s"})
	if err != nil {
		return nil, nil, lockservice.Event{}, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, nil, lockservice.Event{}, answerError(resp)
	}
	rd := bufio.NewReader(resp.Body)
	ev, err := nextLoadEvent(rd)
	if err == nil && ev.Event != "granted" {
		err = fmt.Errorf("stream on %s: %q (%s) instead of granted", w.path, ev.Event, ev.Reason)
	}
	if err != nil {
		resp.Body.Close()
	}
	return resp, rd, ev, err
}

// release asks for the release by id and reads the stream to its end, so
// that its connection serves the next acquire.
func (w *streamWorker) release(ctx context.Context, rd *bufio.Reader, id string) error {
	if err := loadCall(ctx, w.hc, w.url+"/v1/lock/release", lockservice.ReleaseRequest{ID: id}, nil); err != nil {
		return err
	}
	ev, err := nextLoadEvent(rd)
	if err != nil {
		return err
	}
	if ev.Event != "released" {
		return fmt.Errorf("stream on %s: %q (%s) instead of released", w.path, ev.Event, ev.Reason)
	}
	_, err = io.Copy(io.Discard, rd)
	return err
}

// nextLoadEvent reads a stream's next event other than a heartbeat.
func nextLoadEvent(rd *bufio.Reader) (lockservice.Event, error) {
	for {
		line, err := rd.ReadBytes('\n')
		if err != nil {
			return lockservice.Event{}, err
		}
		var ev lockservice.Event
		if err := json.Unmarshal(line, &ev); err != nil {
			return ev, err
		}
		if ev.Event != "heartbeat" {
			return ev, nil
		}
	}
}

// leaseWorker holds with a lease of its own, granted on its first cycle and
// kept alive every third of its TTL, as the clients do: an acquire and a
// release by id a cycle, plus the keep-alives.
type leaseWorker struct {
	hc        *http.Client
	url, path string
	lease     string
	kept      time.Time // when the last keep-alive (or the grant) was sent
}

func (w *leaseWorker) kind() string { return "lease" }

func (w *leaseWorker) cycle(ctx context.Context, held func()) (time.Duration, error) {
	if err := w.keepAlive(ctx); err != nil {
		return 0, err
	}
	t0 := time.Now()
	id, err := w.take(ctx, lockservice.LeaseAcquireRequest{Timeout: "5s"})
	if err != nil {
		return 0, err
	}
	wait := time.Since(t0)
	held()
	return wait, loadCall(ctx, w.hc, w.url+"/v1/lease/release", lockservice.LeaseReleaseRequest{Lease: w.lease, ID: id}, nil)
}

// keepAlive grants the lease if it has none, and keeps it alive once a
// third of its TTL has passed since the last.
func (w *leaseWorker) keepAlive(ctx context.Context) error {
	sent := time.Now()
	switch {
	case w.lease == "":
		var lr lockservice.LeaseResponse
		if err := loadCall(ctx, w.hc, w.url+"/v1/lease/grant", lockservice.LeaseGrantRequest{TTL: loadTTL.String()}, &lr); err != nil {
			return err
		}
		w.lease = lr.Lease
	case sent.Sub(w.kept) >= loadTTL/3:
		if err := loadCall(ctx, w.hc, w.url+"/v1/lease/keepalive", lockservice.LeaseRequest{Lease: w.lease}, nil); err != nil {
			return err
		}
	default:
		return nil
	}
	w.kept = sent
	return nil
}

// take acquires w.path with the lease; req gives the wait (timeout or try).
func (w *leaseWorker) take(ctx context.Context, req lockservice.LeaseAcquireRequest) (string, error) {
	req.Lease, req.Path = w.lease, w.path
	var got lockservice.LeaseAcquireResponse
	if err := loadCall(ctx, w.hc, w.url+"/v1/lease/acquire", req, &got); err != nil {
		return "", err
	}
	if !got.Granted {
		return "", fmt.Errorf("lease acquire on %s: not granted", w.path)
	}
	return got.ID, nil
}

// revoke ends the lease and returns how many of its locks it released.
func (w *leaseWorker) revoke(ctx context.Context) (int, error) {
	var rr lockservice.RevokeResponse
	err := loadCall(ctx, w.hc, w.url+"/v1/lease/revoke", lockservice.LeaseRequest{Lease: w.lease}, &rr)
	w.lease = ""
	return rr.Released, err
}

func (w *leaseWorker) close(ctx context.Context) {
	if w.lease != "" {
		_, _ = w.revoke(ctx)
	}
	w.hc.CloseIdleConnections()
}

// loadPost sends body as JSON.
func loadPost(ctx context.Context, hc *http.Client, url string, body any) (*http.Response, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return hc.Do(req)
}

// loadCall sends one request, wants 200 and decodes the answer into out
// (when not nil); the body is read to its end, so the connection is kept.
func loadCall(ctx context.Context, hc *http.Client, url string, body, out any) error {
	resp, err := loadPost(ctx, hc, url, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return answerError(resp)
	}
	if out != nil {
		err = json.NewDecoder(resp.Body).Decode(out)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return err
}

// answerError is a non-200 answer as an error, with its body.
func answerError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	return errors.New(resp.Request.URL.Path + ": " + resp.Status + ": " + string(bytes.TrimSpace(b)))
}
