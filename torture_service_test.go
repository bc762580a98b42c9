//go:build linux

package zklock_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// The swarm's "service" dimension (issue 41): `zklock serve` runs beside the
// library clients, on its own session through its own proxy, and a few
// callers take the torture's paths through it over HTTP:
//
//   - stream callers hold while their acquire stream is open: from the
//     "granted" line to the "lost" or "released" line, or to the moment they
//     close the stream (sometimes by a POST /v1/lock/release, sometimes by
//     closing the request, and under the stream_kill fault by a reset of the
//     connection mid-hold);
//   - lease callers grant a lease, keep it alive every TTL/3, take locks with
//     it and release them. A lease holding ends at its release, at a loss
//     said by a keep-alive (410, or the holding listed as lost), or by the
//     caller's rule at the send time of the last acknowledged keep-alive plus
//     the TTL, whichever comes first; under the lease_silence fault the
//     caller stops sending keep-alives mid-hold and must then hear 410.
//
// Their holdings go into the ledger like the library's leases (readers share,
// the semaphore's 2 may overlap, tokens of exclusive holders grow). The
// svc_stall faults stall the service's own proxy, shorter and longer than
// its session timeout.
//
// The service runs as a process: the root package cannot import
// cmd/zklock/internal/lockservice (Go's internal rule), so the torture
// builds cmd/zklock (with -race) and runs `zklock serve`.

const (
	// serviceSession is the service's session timeout, asked and granted:
	// a lease's TTL is at least 1 s and at most a third of it. With the
	// service on, the ensemble grants at most this (the library's clients
	// still ask tortureSession but under "granted").
	serviceSession   = 3 * time.Second
	serviceTTL       = time.Second
	serviceHeartbeat = 500 * time.Millisecond
	serviceStreams   = 4 // stream callers
	serviceLeases    = 3 // lease callers
	svcStream        = 1 << 22
	// serviceAsksMore makes the service, under "granted", ask for more than
	// the ensemble grants (10 s), as a service configured for another
	// ensemble would. The service must bound a lease's TTL and trust a
	// proof of contact by the timeout granted, not the one asked for: if
	// it went by the asked one, a lease's caller could hold past the
	// service's session expiry.
	serviceAsksMore = false
)

// errLeaseLapsed ends a lease holding by the caller's rule.
var errLeaseLapsed = fmt.Errorf("%w: the lease's ttl passed since its last acknowledged keep-alive was sent", zklock.ErrLockLost)

// errStreamLost ends a stream holding at its "lost" line.
var errStreamLost = fmt.Errorf("%w: the stream said lost", zklock.ErrLockLost)

// errLeaseLost ends a lease holding at a loss a keep-alive said.
var errLeaseLost = fmt.Errorf("%w: a keep-alive said the lease or the holding was lost", zklock.ErrLockLost)

var errKilled = errors.New("the caller was killed")

type svcRun struct {
	tt      *torture
	proxy   *zktest.Proxy
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	stderr  tailBuffer
	url     string
	asked   time.Duration
	httpc   *http.Client // lease callers' (keep-alive pool)
	tr      *http.Transport
	busy    atomic.Bool // a svc_stall is under way

	mu        sync.Mutex
	worst     time.Duration // worst overshoot of a wait's timeout
	worstWhat string
	streams   []*streamCaller
	leases    []*leaseCaller
}

type streamCaller struct {
	idx   int
	armed atomic.Bool // the stream_kill fault: killed mid-way through its next hold
}

type leaseCaller struct {
	idx     int
	armed   atomic.Bool // the lease_silence fault: silenced mid-way through its next hold
	silence atomic.Bool // no more keep-alives
}

// buildService builds cmd/zklock into dir, with the race detector if it can.
func buildService(t interface{ Fatalf(string, ...any) }, dir string) string {
	bin := filepath.Join(dir, "zklock")
	goTool := "go" // make test runs with go on PATH
	for _, args := range [][]string{{"build", "-race", "-o", bin, "./cmd/zklock"}, {"build", "-o", bin, "./cmd/zklock"}} {
		cmd := exec.Command(goTool, args...)
		out, err := cmd.CombinedOutput()
		if err == nil {
			return bin
		}
		if args[1] != "-race" {
			t.Fatalf("building zklock for the service: %v\n%s", err, out)
		}
	}
	return bin
}

// startService builds and starts `zklock serve` on its own proxy.
func (tt *torture) startService() {
	if !tt.cfg.sw.service {
		return
	}
	sv := &svcRun{tt: tt, proxy: zktest.NewProxy(tt.t, tt.cluster.Addrs()...), exited: make(chan struct{}), asked: serviceSession}
	if serviceAsksMore && tt.cfg.sw.granted {
		sv.asked = 10 * time.Second
	}
	bin := buildService(tt.t, tt.t.TempDir())
	sv.cmd = exec.Command(bin, "serve", "--servers", sv.proxy.Addr(), "--listen", "127.0.0.1:0",
		"--session-timeout", sv.asked.String(), "--heartbeat", serviceHeartbeat.String(), "--max-holds", "256")
	sv.cmd.Stderr = &sv.stderr
	out, err := sv.cmd.StdoutPipe()
	if err != nil {
		tt.t.Fatal(err)
	}
	if err := sv.cmd.Start(); err != nil {
		tt.t.Fatalf("starting the service: %v", err)
	}
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case first <- sc.Text():
			default:
			}
		}
	}()
	go func() {
		sv.waitErr = sv.cmd.Wait()
		close(sv.exited)
	}()
	select {
	case line := <-first:
		sv.url = strings.TrimPrefix(line, "listening on ")
	case <-sv.exited:
		tt.t.Fatalf("the service exited at start: %v\n%s", sv.waitErr, sv.stderr.String())
	case <-time.After(time.Minute):
		tt.t.Fatalf("the service did not start within a minute\n%s", sv.stderr.String())
	}
	sv.tr = &http.Transport{MaxIdleConnsPerHost: 32}
	sv.httpc = &http.Client{Transport: sv.tr}
	for i := range serviceStreams {
		sv.streams = append(sv.streams, &streamCaller{idx: i})
	}
	for i := range serviceLeases {
		sv.leases = append(sv.leases, &leaseCaller{idx: i})
	}
	tt.svc = sv
	tt.t.Logf("torture: service at %s (session %v asked, ttl %v)", sv.url, sv.asked, serviceTTL)
}

// startServiceCallers runs the callers until ctx ends, as workers.
func (tt *torture) startServiceCallers(ctx context.Context) {
	if tt.svc == nil {
		return
	}
	for _, c := range tt.svc.streams {
		tt.workers.Add(1)
		go tt.svc.streamLoop(ctx, c)
	}
	for _, c := range tt.svc.leases {
		tt.workers.Add(1)
		go tt.svc.leaseLoop(ctx, c)
	}
}

// stopService ends the service (SIGTERM: it releases every holding) and
// checks that it exited cleanly (a race report exits 66).
func (tt *torture) stopService() {
	sv := tt.svc
	if sv == nil {
		return
	}
	sv.tr.CloseIdleConnections()
	_ = sv.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-sv.exited:
	case <-time.After(15 * time.Second):
		tt.lg.violate("the service did not stop within 15 s of SIGTERM\n%s", sv.stderr.String())
		_ = sv.cmd.Process.Kill()
		<-sv.exited
	}
	if sv.waitErr != nil {
		tt.lg.violate("the service exited with %v; its stderr:\n%s", sv.waitErr, sv.stderr.String())
	}
	_ = sv.proxy.Close()
}

// draw picks what a caller takes: a mutex path, the RWMutex path as a
// reader or a writer, or the semaphore.
func (sv *svcRun) draw(rng *rand.Rand) (kind, path string, limit int, mark func(*leaseRec)) {
	cfg := sv.tt.cfg
	switch n := rng.IntN(10); {
	case n < 6:
		return "mutex", cfg.paths[rng.IntN(len(cfg.paths))], 0, func(*leaseRec) {}
	case n < 7:
		return "read", cfg.rwPath, 0, func(r *leaseRec) { r.shared = true }
	case n < 8:
		return "write", cfg.rwPath, 0, func(*leaseRec) {}
	default:
		return "semaphore", cfg.semPath, tortureSemLimit, func(r *leaseRec) { r.limit = tortureSemLimit }
	}
}

func (sv *svcRun) post(ctx context.Context, c *http.Client, route string, body any) (*http.Response, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, "POST", sv.url+route, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return c.Do(req)
}

// call posts and decodes a one-object answer; status 0 when the request
// failed.
func (sv *svcRun) call(ctx context.Context, timeout time.Duration, route string, body, out any) (int, string) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := sv.post(ctx, sv.httpc, route, body)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Code string `json:"code"`
		}
		_ = json.Unmarshal(data, &e)
		return resp.StatusCode, e.Code
	}
	if out != nil {
		_ = json.Unmarshal(data, out)
	}
	return resp.StatusCode, ""
}

type svcEvent struct {
	Event  string `json:"event"`
	ID     string `json:"id"`
	Node   string `json:"node"`
	Token  int64  `json:"token"`
	Code   string `json:"code"`
	Reason string `json:"reason"`
}

// svcOvershootBound is how far past its timeout a wait through the service
// may end: the library's bound, grown by the service's longer session (the
// library's answer bounds scale with it).
const svcOvershootBound = tortureCleanupTimeout + overshootSlack + (serviceSession - tortureSession)

// returned checks when a wait through the service ended against its
// timeout dl; a wait cut short by the run's stop is not timed.
func (sv *svcRun) returned(what string, dl, at mono) {
	if stop := mono(sv.tt.stoppedAt.Load()); stop != 0 && stop < dl {
		return
	}
	late := time.Duration(at - dl)
	sv.mu.Lock()
	if late > sv.worst {
		sv.worst, sv.worstWhat = late, what
	}
	sv.mu.Unlock()
	if late > svcOvershootBound {
		sv.tt.lg.violate("%s: a wait through the service ended %v after its timeout (bound %v)", what, late.Round(time.Millisecond), svcOvershootBound)
	}
}

// ---- stream callers ----

func (sv *svcRun) streamLoop(ctx context.Context, c *streamCaller) {
	defer sv.tt.workers.Done()
	rng := rand.New(rand.NewPCG(sv.tt.cfg.seed, uint64(svcStream+c.idx)))
	for ctx.Err() == nil {
		sv.stream(ctx, c, rng)
		sleepCtx(ctx, randDur(rng, 0, 30*time.Millisecond))
	}
}

// stream is one acquire stream: wait, hold a while, then release it (by a
// POST, or by closing the stream), unless it is lost or killed first.
func (sv *svcRun) stream(ctx context.Context, c *streamCaller, rng *rand.Rand) {
	tt := sv.tt
	who := fmt.Sprintf("s%d stream", c.idx)
	kind, path, limit, mark := sv.draw(rng)
	timeout := randDur(rng, 100*time.Millisecond, 5*time.Second)
	hold := (&op{rng: rng}).holdTime()
	byPost := rng.IntN(2) == 0
	var conn atomic.Pointer[net.TCPConn]
	tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		cn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := cn.(*net.TCPConn); ok {
			conn.Store(tc)
		}
		return cn, err
	}}
	defer tr.CloseIdleConnections()
	rctx, cancel := context.WithCancel(context.Background()) // ended by the caller, not the run
	defer cancel()
	body := map[string]any{"path": path, "kind": kind, "timeout": timeout.String(), "owner": who}
	if limit > 0 {
		body["limit"] = limit
	}
	called := monoNow()
	dl := called + mono(timeout)
	resp, err := sv.post(rctx, &http.Client{Transport: tr}, "/v1/lock/acquire", body)
	if err != nil {
		tt.counts.add("svc.stream_error")
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tt.counts.add(fmt.Sprintf("svc.stream_status_%d", resp.StatusCode))
		return
	}
	events := make(chan svcEvent, 16)
	readDone, quit := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(readDone)
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var ev svcEvent
			if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Event == "heartbeat" {
				continue
			}
			select {
			case events <- ev:
			case <-quit:
				return
			}
		}
	}()
	defer func() { close(quit); cancel(); <-readDone }()
	// Waiting for the grant.
	var granted svcEvent
	for granted.Event == "" {
		select {
		case ev, ok := <-events:
			at := monoNow()
			switch {
			case !ok:
				tt.counts.add("svc.stream_ended_waiting")
				return
			case ev.Event == "granted":
				granted = ev
			case ev.Event == "failed":
				tt.counts.add("svc.stream_failed." + ev.Code)
				if ev.Code == "timeout" {
					sv.returned(who+" "+kind, dl, at)
				}
				return
			default:
				tt.lg.violate("%s on %s: %q before granted", who, path, ev.Event)
				return
			}
		case <-ctx.Done():
			return
		}
	}
	at := monoNow()
	done := make(chan struct{})
	r := &leaseRec{path: path, node: granted.Node, owner: who, holder: who + " " + kind, start: at, planned: at + mono(hold), done: done}
	mark(r)
	tt.lg.grant(r)
	tt.lg.setToken(r, granted.Token)
	tt.counts.add("grant.svc_stream")
	tt.counts.add("svc.stream." + kind)
	end := func(at mono, why error) {
		tt.lg.ended(r, at, why)
		close(done)
	}
	var kill <-chan time.Time
	if c.armed.CompareAndSwap(true, false) {
		hold = max(hold, randDur(rng, 300*time.Millisecond, 2*time.Second))
		kill = time.After(time.Duration(rng.Int64N(int64(hold))))
	}
	timer := time.NewTimer(hold)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-events:
			at := monoNow()
			switch {
			case !ok:
				end(at, errors.New("the stream ended without a last line"))
				tt.counts.add("svc.stream_eof")
			case ev.Event == "lost":
				end(at, errStreamLost)
				tt.counts.add("svc.stream_lost")
			case ev.Event == "released":
				end(at, zklock.ErrReleased)
				tt.counts.add("svc.stream_released_by_service")
			default:
				continue
			}
			return
		case <-kill:
			end(monoNow(), errKilled)
			if tc := conn.Load(); tc != nil {
				_ = tc.SetLinger(0) // a reset, as a killed process's kernel may send
				_ = tc.Close()
			}
			tt.began(fStreamKill, "%s holding %s", who, granted.Node)
			return
		case <-timer.C:
		case <-ctx.Done():
		}
		end(monoNow(), zklock.ErrReleased)
		if byPost {
			code, _ := sv.call(context.Background(), 10*time.Second, "/v1/lock/release", map[string]string{"id": granted.ID}, nil)
			tt.counts.add(fmt.Sprintf("svc.stream_release_%d", code))
		}
		return
	}
}

// ---- lease callers ----

// leaseState is one lease of a caller, shared by its holder and its
// keep-alive goroutine.
type leaseState struct {
	id string

	mu       sync.Mutex
	deadline mono   // the caller's: the last acknowledged keep-alive's sending plus the TTL
	lastAck  mono   // when that acknowledgement arrived
	dead     string // the code a 410 answered
	cur      *svcHolding
}

type svcHolding struct {
	recs  []*leaseRec // one, or k for k permits
	done  chan struct{}
	id    string
	ended bool
}

// endLocked ends the current holding at at; called with mu held.
func (ls *leaseState) endLocked(tt *torture, at mono, why error) {
	h := ls.cur
	if h == nil || h.ended {
		return
	}
	h.ended = true
	for _, r := range h.recs {
		tt.lg.ended(r, at, why)
	}
	close(h.done)
}

// lapse ends the current holding at the deadline if now is past it.
func (ls *leaseState) lapse(tt *torture, now mono) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if now >= ls.deadline {
		ls.endLocked(tt, ls.deadline, errLeaseLapsed)
		return true
	}
	return ls.cur != nil && ls.cur.ended
}

func (sv *svcRun) leaseLoop(ctx context.Context, c *leaseCaller) {
	defer sv.tt.workers.Done()
	rng := rand.New(rand.NewPCG(sv.tt.cfg.seed, uint64(svcStream+100+c.idx)))
	for ctx.Err() == nil {
		sv.lease(ctx, c, rng)
		sleepCtx(ctx, randDur(rng, 0, 50*time.Millisecond))
	}
}

// lease grants a lease, keeps it alive, and takes locks with it one at a
// time until it is lost, revoked, or silenced by the fault.
func (sv *svcRun) lease(ctx context.Context, c *leaseCaller, rng *rand.Rand) {
	tt := sv.tt
	sent := monoNow()
	var gr struct {
		Lease string `json:"lease"`
	}
	if code, ecode := sv.call(ctx, 5*time.Second, "/v1/lease/grant", map[string]string{"ttl": serviceTTL.String()}, &gr); code != http.StatusOK {
		tt.counts.add(fmt.Sprintf("svc.grant_%d%s", code, dotted(ecode)))
		sleepCtx(ctx, 100*time.Millisecond)
		return
	}
	tt.counts.add("svc.leases")
	ls := &leaseState{id: gr.Lease, deadline: sent + mono(serviceTTL), lastAck: monoNow()}
	kctx, stopKeep := context.WithCancel(ctx)
	keeperDone := make(chan struct{})
	go func() {
		defer close(keeperDone)
		sv.keepAlive(kctx, c, ls)
	}()
	defer func() { stopKeep(); <-keeperDone }()
	for ctx.Err() == nil {
		ls.mu.Lock()
		dead, lapsed := ls.dead, monoNow() >= ls.deadline
		ls.mu.Unlock()
		if dead != "" || c.silence.Load() {
			break
		}
		if lapsed {
			// By the rule the caller holds nothing now; it waits for the
			// next acknowledgement (or the loss) before taking more.
			sleepCtx(ctx, 50*time.Millisecond)
			continue
		}
		if rng.IntN(12) == 0 {
			code, _ := sv.call(context.Background(), 10*time.Second, "/v1/lease/revoke", map[string]string{"lease": ls.id}, nil)
			tt.counts.add(fmt.Sprintf("svc.revoke_%d", code))
			return
		}
		sv.leaseHold(ctx, c, rng, ls)
		sleepCtx(ctx, randDur(rng, 0, 30*time.Millisecond))
	}
	stopKeep()
	<-keeperDone
	if c.silence.Load() {
		sv.silenced(c, ls)
		return
	}
	ls.mu.Lock()
	dead := ls.dead
	ls.mu.Unlock()
	if dead == "" {
		_, _ = sv.call(context.Background(), 10*time.Second, "/v1/lease/revoke", map[string]string{"lease": ls.id}, nil)
	}
}

// keepAlive sends a keep-alive every TTL/3 until ctx ends, the lease is
// lost, or the caller is silenced.
func (sv *svcRun) keepAlive(ctx context.Context, c *leaseCaller, ls *leaseState) {
	tt := sv.tt
	tick := time.NewTicker(serviceTTL / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if c.silence.Load() {
			return
		}
		sent := monoNow()
		var resp struct {
			Holdings []struct {
				ID   string `json:"id"`
				Lost string `json:"lost"`
			} `json:"holdings"`
		}
		code, ecode := sv.call(ctx, 3*time.Second, "/v1/lease/keepalive", map[string]string{"lease": ls.id}, &resp)
		at := monoNow()
		ls.mu.Lock()
		if at >= ls.deadline {
			ls.endLocked(tt, ls.deadline, errLeaseLapsed) // the answer came too late to count
		}
		switch code {
		case http.StatusOK:
			ls.deadline, ls.lastAck = max(ls.deadline, sent+mono(serviceTTL)), at
			for _, h := range resp.Holdings {
				if ls.cur != nil && h.ID == ls.cur.id && h.Lost != "" {
					ls.endLocked(tt, min(at, ls.deadline), errLeaseLost)
					tt.counts.add("svc.keepalive_listed_lost")
				}
			}
		case http.StatusGone:
			ls.dead = ecode
			ls.endLocked(tt, min(at, ls.deadline), errLeaseLost)
			tt.counts.add("svc.keepalive_410." + ecode)
		default:
			tt.counts.add(fmt.Sprintf("svc.keepalive_%d%s", code, dotted(ecode)))
		}
		dead := ls.dead != ""
		ls.mu.Unlock()
		if dead {
			return
		}
	}
}

// leaseHold takes one lock with the lease, holds it, and releases it.
func (sv *svcRun) leaseHold(ctx context.Context, c *leaseCaller, rng *rand.Rand, ls *leaseState) {
	tt := sv.tt
	who := fmt.Sprintf("l%d lease", c.idx)
	kind, path, limit, mark := sv.draw(rng)
	hold := (&op{rng: rng}).holdTime()
	body := map[string]any{"lease": ls.id, "path": path, "kind": kind, "owner": who}
	timeout := randDur(rng, 100*time.Millisecond, 3*time.Second)
	if rng.IntN(4) == 0 {
		body["try"] = true
		timeout = 0
	} else {
		body["timeout"] = timeout.String()
	}
	if limit > 0 {
		body["limit"] = limit
	}
	permits := 1
	if kind == "semaphore" && rng.IntN(3) == 0 {
		permits = tortureSemLimit // k permits: k nodes, k of the limit, k against --max-holds (issue 56)
		body["permits"] = permits
	}
	called := monoNow()
	var got struct {
		ID    string `json:"id"`
		Node  string `json:"node"`
		Token int64  `json:"token"`
	}
	code, ecode := sv.call(context.Background(), timeout+10*time.Second, "/v1/lease/acquire", body, &got)
	at := monoNow()
	if timeout > 0 && code == http.StatusRequestTimeout {
		sv.returned(who+" "+kind, called+mono(timeout), at)
	}
	switch code {
	case http.StatusOK:
	case http.StatusGone:
		ls.mu.Lock()
		ls.dead = ecode
		ls.mu.Unlock()
		tt.counts.add("svc.acquire_410." + ecode)
		return
	default:
		tt.counts.add(fmt.Sprintf("svc.acquire_%d%s", code, dotted(ecode)))
		return
	}
	release := func() {
		code, ecode := sv.call(context.Background(), 10*time.Second, "/v1/lease/release", map[string]string{"lease": ls.id, "id": got.ID}, nil)
		tt.counts.add(fmt.Sprintf("svc.release_%d%s", code, dotted(ecode)))
	}
	ls.mu.Lock()
	if at >= ls.deadline || ls.dead != "" {
		// Granted, but by the rule the caller may no longer use what the
		// lease holds: it lets it go unused.
		ls.mu.Unlock()
		tt.counts.add("svc.granted_past_deadline")
		release()
		return
	}
	done := make(chan struct{})
	nodes := strings.Split(got.Node, ",") // k permits: k nodes, each a lease of the semaphore in the ledger
	cur := &svcHolding{done: done, id: got.ID}
	for _, node := range nodes {
		r := &leaseRec{path: path, node: node, owner: who, holder: who + " " + kind, start: at, planned: at + mono(hold), done: done}
		mark(r)
		tt.lg.grant(r)
		tt.lg.setToken(r, got.Token)
		cur.recs = append(cur.recs, r)
	}
	ls.cur = cur
	ls.mu.Unlock()
	if len(nodes) > 1 {
		tt.counts.add("svc.lease_permits")
	}
	tt.counts.add("grant.svc_lease")
	tt.counts.add("svc.lease." + kind)
	if rng.IntN(8) == 0 {
		sv.crossRelease(who, got.ID)
	}
	if rng.IntN(8) == 0 {
		sv.nestedAcquire(who, ls.id, path, kind, nodes[0])
	}
	var silenceAt mono
	if c.armed.CompareAndSwap(true, false) {
		hold = max(hold, 2*serviceTTL)
		silenceAt = monoNow() + mono(rng.Int64N(int64(serviceTTL)))
	}
	until := monoNow() + mono(hold)
	for monoNow() < until && ctx.Err() == nil && !c.silence.Load() {
		if silenceAt != 0 && monoNow() >= silenceAt {
			c.silence.Store(true)
			break
		}
		if ls.lapse(tt, monoNow()) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if c.silence.Load() {
		return // silenced: it holds until the rule ends it (silenced)
	}
	ls.mu.Lock()
	ls.endLocked(tt, min(monoNow(), ls.deadline), zklock.ErrReleased)
	ls.mu.Unlock()
	release()
}

// crossRelease sends a lease's holding id to the stream route, as a caller
// that mixed up its ids would (issue 49): it must not release it (409
// lease_holding, or 404 or 409 lost if it ended just before); the holding
// goes on, and the ledger checks that nobody else is granted the path
// meanwhile.
func (sv *svcRun) crossRelease(who, id string) {
	code, ecode := sv.call(context.Background(), 10*time.Second, "/v1/lock/release", map[string]string{"id": id}, nil)
	sv.tt.counts.add(fmt.Sprintf("svc.cross_release_%d%s", code, dotted(ecode)))
	if code == http.StatusOK { // 404 or 409 lost are right for a holding that ended just before
		sv.tt.lg.violate("%s: /v1/lock/release released a lease's holding %s (200): only its lease may", who, id)
	}
}

// nestedAcquire asks, with the lease, for a lock inside the path it holds
// (inside a semaphore's leases path for a semaphore), as a careless or
// hostile caller would (issue 56): it must not be granted, or the holder's
// queue would hold a stranger.
func (sv *svcRun) nestedAcquire(who, lease, path, kind, held string) {
	inner := path + "/nested"
	if kind == "semaphore" {
		inner = path + "/leases/nested"
	}
	var got struct {
		ID string `json:"id"`
	}
	code, ecode := sv.call(context.Background(), 10*time.Second, "/v1/lease/acquire", map[string]any{"lease": lease, "path": inner, "try": true}, &got)
	sv.tt.counts.add(fmt.Sprintf("svc.nested_%d%s", code, dotted(ecode)))
	if code != http.StatusOK {
		return
	}
	sv.call(context.Background(), 10*time.Second, "/v1/lease/release", map[string]string{"lease": lease, "id": got.ID}, nil)
	// Granted: a violation if the holding's node was there throughout (then
	// the path was a lock path in use when the inner one was made).
	if ok, _, err := sv.tt.obs.Exists(held); err == nil && ok {
		sv.tt.lg.violate("%s: granted %s inside %s, which it holds: a lock path inside a lock path in use", who, inner, path)
	}
}

// silenced: the lease_silence fault stopped the caller's keep-alives. Its
// holding ends by the rule at its deadline; once the service's deadline
// (counted from the keep-alive's arrival) has surely passed, a keep-alive
// must answer 410, and so must the holding's release.
func (sv *svcRun) silenced(c *leaseCaller, ls *leaseState) {
	tt := sv.tt
	defer c.silence.Store(false)
	// The keep-alive goroutine has stopped; one it abandoned in flight may
	// have reached the service (and moved its deadline) unacknowledged.
	stopped := monoNow()
	ls.mu.Lock()
	deadline, lastAck, cur := ls.deadline, max(ls.lastAck, stopped), ls.cur
	ls.mu.Unlock()
	tt.began(fLeaseSilence, "l%d's lease (deadline in %v)", c.idx, time.Duration(deadline-monoNow()).Round(time.Millisecond))
	for monoNow() < deadline {
		time.Sleep(5 * time.Millisecond)
	}
	ls.lapse(tt, monoNow())
	wake := lastAck + mono(serviceTTL+500*time.Millisecond)
	if d := time.Duration(wake - monoNow()); d > 0 {
		time.Sleep(d)
	}
	code, ecode := sv.call(context.Background(), 10*time.Second, "/v1/lease/keepalive", map[string]string{"lease": ls.id}, nil)
	tt.counts.add(fmt.Sprintf("svc.silenced_keepalive_%d%s", code, dotted(ecode)))
	if code == http.StatusOK {
		tt.lg.violate("l%d: a keep-alive of lease %s was acknowledged %v after the TTL had passed since the last acknowledged one arrived",
			c.idx, ls.id, time.Duration(monoNow()-lastAck-mono(serviceTTL)).Round(time.Millisecond))
	}
	if cur != nil {
		code, ecode := sv.call(context.Background(), 10*time.Second, "/v1/lease/release", map[string]string{"lease": ls.id, "id": cur.id}, nil)
		tt.counts.add(fmt.Sprintf("svc.silenced_release_%d%s", code, dotted(ecode)))
	}
}

func dotted(code string) string {
	if code == "" {
		return ""
	}
	return "." + code
}

// ---- faults ----

// serviceFault: the service's session cut (its proxy stalled longer than
// its session timeout, then maybe cut) or stalled for less.
func (tt *torture) serviceFault(f fault) {
	sv := tt.svc
	switch f.kind {
	case fSvcStallShort:
		d := between(f.u1, serviceSession/10, 2*serviceSession/5)
		tt.began(f.kind, "service for %v", d.Round(time.Millisecond))
		sv.proxy.Stall()
		time.Sleep(d)
		sv.proxy.Resume()
	case fSvcStallLong:
		d := between(f.u1, 6*serviceSession/5, 5*serviceSession/2)
		tt.began(f.kind, "service for %v, then cut: %v", d.Round(time.Millisecond), f.flag)
		sv.proxy.Stall()
		time.Sleep(d)
		sv.proxy.Resume()
		if f.flag {
			sv.proxy.Cut()
		}
	}
	tt.lg.note("healed service")
}

// killStream arms a stream caller: its next hold is at least 300 ms, and
// its connection is reset at a random moment of it (counted then).
func (tt *torture) killStream(f fault) {
	if !tt.svc.streams[f.slot%len(tt.svc.streams)].armed.CompareAndSwap(false, true) {
		tt.counts.add("skipped." + f.kind.String())
	}
}

// silenceLease arms a lease caller: its next hold is at least two TTLs, and
// its keep-alives stop within the first TTL of it (counted then).
func (tt *torture) silenceLease(f fault) {
	if !tt.svc.leases[f.slot%len(tt.svc.leases)].armed.CompareAndSwap(false, true) {
		tt.counts.add("skipped." + f.kind.String())
	}
}

// probeService: once the faults heal, the service grants an uncontended
// lock through a lease and through a stream.
func (tt *torture) probeService() {
	sv := tt.svc
	if sv == nil {
		return
	}
	path := tt.cfg.root + "/probe/svc"
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := sv.probe(path)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tt.lg.violate("the service cannot grant an uncontended lock after the faults healed: %v", err)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (sv *svcRun) probe(path string) error {
	ctx := context.Background()
	var gr struct {
		Lease string `json:"lease"`
	}
	if code, ecode := sv.call(ctx, 5*time.Second, "/v1/lease/grant", map[string]string{"ttl": serviceTTL.String()}, &gr); code != http.StatusOK {
		return fmt.Errorf("lease grant: %d %s", code, ecode)
	}
	defer sv.call(ctx, 5*time.Second, "/v1/lease/revoke", map[string]string{"lease": gr.Lease}, nil)
	if code, ecode := sv.call(ctx, 5*time.Second, "/v1/lease/acquire", map[string]any{"lease": gr.Lease, "path": path, "try": true}, nil); code != http.StatusOK {
		return fmt.Errorf("lease acquire: %d %s", code, ecode)
	}
	if code, ecode := sv.call(ctx, 5*time.Second, "/v1/lease/revoke", map[string]string{"lease": gr.Lease}, nil); code != http.StatusOK {
		return fmt.Errorf("lease revoke: %d %s", code, ecode)
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := sv.post(rctx, sv.httpc, "/v1/lock/acquire", map[string]any{"path": path, "try": true})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	line, _ := bufio.NewReader(resp.Body).ReadBytes('\n')
	var ev svcEvent
	if resp.StatusCode != http.StatusOK || json.Unmarshal(line, &ev) != nil || ev.Event != "granted" {
		return fmt.Errorf("stream try: %d %s", resp.StatusCode, line)
	}
	return nil
}
