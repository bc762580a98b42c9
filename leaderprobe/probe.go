// Package leaderprobe serves an Election's leadership over HTTP, for a
// load balancer's health check or a Kubernetes readiness probe: GET /leader
// answers 200 only while this process leads, 503 otherwise, with a JSON
// body naming the leader; GET /healthz answers 200 while the process runs.
//
//	probe := leaderprobe.New(ctx, election)
//	go http.ListenAndServe(":8081", probe)
//	ld, err := election.Campaign(ctx, "10.0.0.7:8080")
//	probe.Lead(ld)
//
// /leader applies the lease's loss rule when it answers (Leadership.Err):
// it says 503 at the latest when the leadership must be presumed lost, 0.8
// of the session timeout after ZooKeeper last answered, before another
// process can be elected.
package leaderprobe

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/zklock/zklock"
)

// Probe is an http.Handler for one Election. It is safe for concurrent use.
type Probe struct {
	e    *zklock.Election
	mu   sync.Mutex
	lead *zklock.Leadership
	last zklock.Leader // the leader as last observed
}

// New returns a Probe for e. It follows e's leader (Election.Observe: one
// watch) until ctx ends or the client closes; it does not wait for I/O.
func New(ctx context.Context, e *zklock.Election) *Probe {
	p := &Probe{e: e}
	ch := e.Observe(ctx)
	go func() {
		for l := range ch {
			p.mu.Lock()
			p.last = l
			p.mu.Unlock()
		}
	}()
	return p
}

// Lead records this process's leadership (nil: it campaigns or has none):
// /leader answers 200 while it holds.
func (p *Probe) Lead(ld *zklock.Leadership) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lead = ld
}

// Status is the body of GET /leader.
type Status struct {
	Leading bool    `json:"leading"`
	Path    string  `json:"path"`
	Leader  *Leader `json:"leader"`           // nil while nobody is known to lead
	Reason  string  `json:"reason,omitempty"` // why this process does not lead
}

// Leader names the leader.
type Leader struct {
	Node  string `json:"node"`
	Value string `json:"value"`
	Token int64  `json:"token"`
	Host  string `json:"host,omitempty"`
	PID   int    `json:"pid,omitempty"`
}

// ServeHTTP answers GET /leader and GET /healthz (and HEAD); it does no I/O.
func (p *Probe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "only GET and HEAD", http.StatusMethodNotAllowed)
		return
	}
	switch r.URL.Path {
	case "/healthz":
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	case "/leader":
		st := p.Status()
		code := http.StatusOK
		if !st.Leading {
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, code, st)
	default:
		http.NotFound(w, r)
	}
}

// Status is what /leader answers now.
func (p *Probe) Status() Status {
	p.mu.Lock()
	ld, last := p.lead, p.last
	p.mu.Unlock()
	st := Status{Path: p.e.Path()}
	if last.Node != "" {
		st.Leader = &Leader{Node: last.Node, Value: last.Value, Token: last.Token, Host: last.Owner.Host, PID: last.Owner.PID}
	}
	switch {
	case ld == nil:
		st.Reason = "not elected"
	case ld.Err() != nil:
		st.Reason = ld.Err().Error()
	default:
		st.Leading = true
		l := ld.Lease()
		if st.Leader == nil || st.Leader.Node != l.Node() {
			tok, _ := l.Token(context.Background()) // no I/O on a client made by Connect
			st.Leader = &Leader{Node: l.Node(), Token: tok}
		}
	}
	return st
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
