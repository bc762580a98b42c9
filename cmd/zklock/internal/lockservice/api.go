package lockservice

import (
	"time"

	"github.com/zklock/zklock"
)

// The request and response bodies of the HTTP API. Their JSON names are
// those of docs/openapi.json (a test checks the two agree).

// AcquireRequest is the body of POST /v1/lock/acquire.
type AcquireRequest struct {
	Path    string `json:"path"`
	Kind    string `json:"kind,omitempty"`    // mutex (default), read, write, semaphore
	Limit   int    `json:"limit,omitempty"`   // semaphore: its number of permits, N (how many hold at once)
	Permits int    `json:"permits,omitempty"` // semaphore: how many of the N to take at once, k (default 1)
	Timeout string `json:"timeout,omitempty"` // a Go duration ("5s"); empty waits until the caller leaves
	Try     bool   `json:"try,omitempty"`     // do not wait: 409 at once if held or waited for
	Owner   string `json:"owner,omitempty"`   // the name 'zklock status' shows (default: the caller's)
	Host    string `json:"host,omitempty"`    // the caller's host, for 'zklock status'
	PID     int    `json:"pid,omitempty"`     // the caller's process id, for 'zklock status'
}

// CampaignRequest is the body of POST /v1/election/campaign.
type CampaignRequest struct {
	Path    string `json:"path"`
	Value   string `json:"value"`
	Timeout string `json:"timeout,omitempty"`
	Owner   string `json:"owner,omitempty"`
	Host    string `json:"host,omitempty"`
	PID     int    `json:"pid,omitempty"`
}

// ReleaseRequest is the body of POST /v1/lock/release.
type ReleaseRequest struct {
	ID string `json:"id"`
}

// ReleaseResponse answers a release.
type ReleaseResponse struct {
	ID       string `json:"id"`
	Released bool   `json:"released"`
}

// Event is one line of a holding's stream (application/x-ndjson):
// "heartbeat" every interval while waiting and holding, "granted" (or
// "elected") once, then at the end "released" or "lost"; or "failed" (with
// a code) when a wait ends without the lock.
type Event struct {
	Event  string `json:"event"`
	ID     string `json:"id"`
	Path   string `json:"path"`
	Node   string `json:"node,omitempty"`
	Token  int64  `json:"token,omitempty"`
	Reason string `json:"reason,omitempty"`
	Code   string `json:"code,omitempty"` // "failed": timeout, unreachable, incompatible, zookeeper_refused, closing, failed
	// Seq orders the events of every stream of this service: an event
	// written before another has a smaller Seq.
	Seq int64 `json:"seq"`
}

// Contender is one node of a lock's queue in a StatusResponse.
type Contender struct {
	Node     string    `json:"node"`
	Sequence int64     `json:"sequence"`
	Token    int64     `json:"token"`
	Holder   bool      `json:"holder"`
	Reader   bool      `json:"reader"`
	Owner    string    `json:"owner,omitempty"`
	Host     string    `json:"host,omitempty"`
	PID      int       `json:"pid,omitempty"`
	Value    string    `json:"value,omitempty"`
	Since    time.Time `json:"since,omitzero"`
}

// StatusResponse answers GET /v1/lock/status.
type StatusResponse struct {
	Path       string      `json:"path"`
	Contenders []Contender `json:"contenders"`
}

// LeaderResponse answers GET /v1/election/leader, and is each event of
// GET /v1/election/watch (with an empty node while nobody leads).
type LeaderResponse struct {
	Path  string `json:"path"`
	Node  string `json:"node"`
	Value string `json:"value"`
	Token int64  `json:"token"`
	Owner string `json:"owner,omitempty"`
	Host  string `json:"host,omitempty"`
	PID   int    `json:"pid,omitempty"`
}

// HealthResponse answers GET /healthz; ok as zklock exec --http's /healthz.
type HealthResponse struct {
	OK      bool   `json:"ok"`
	Session string `json:"session"`
	// Locks is "presumed_lost" when the service's locks are presumed lost
	// (ZooKeeper's leader not heard from for too long) although the
	// session's state has not changed yet.
	Locks string `json:"locks,omitempty"`
}

// ErrorResponse is the body of every answer other than 2xx.
type ErrorResponse struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

func contenderOf(c zklock.Contender) Contender {
	return Contender{
		Node: c.Node, Sequence: c.Sequence, Token: c.Token, Holder: c.Holder, Reader: c.Reader,
		Owner: c.Owner.Name, Host: c.Owner.Host, PID: c.Owner.PID, Value: c.Owner.Value, Since: c.Owner.Since,
	}
}

func leaderOf(path string, l zklock.Leader) LeaderResponse {
	return LeaderResponse{
		Path: path, Node: l.Node, Value: l.Value, Token: l.Token,
		Owner: l.Owner.Name, Host: l.Owner.Host, PID: l.Owner.PID,
	}
}

// LeaseGrantRequest is the body of POST /v1/lease/grant.
type LeaseGrantRequest struct {
	TTL string `json:"ttl"` // a Go duration ("3s"), between 1s and a third of the session timeout ZooKeeper granted the service
}

// LeaseRequest is the body of POST /v1/lease/keepalive and /v1/lease/revoke.
type LeaseRequest struct {
	Lease string `json:"lease"`
}

// LeaseResponse answers a lease's grant, keep-alive and GET
// /v1/lease/holdings: the lease, its TTL, and what it holds.
type LeaseResponse struct {
	Lease     string         `json:"lease"`
	TTL       string         `json:"ttl"`
	TTLMillis int64          `json:"ttl_ms"`
	Holdings  []LeaseHolding `json:"holdings"`
}

// LeaseHolding is one lock a lease holds; Lost says why it was lost (its
// release then answers 409 lost and drops it from the list).
type LeaseHolding struct {
	ID    string `json:"id"`
	Path  string `json:"path"`
	Kind  string `json:"kind"`
	Node  string `json:"node"`
	Token int64  `json:"token"`
	Lost  string `json:"lost,omitempty"`
}

// LeaseAcquireRequest is the body of POST /v1/lease/acquire: an acquire's
// fields, and the lease to hold it with. Without try it needs a timeout.
type LeaseAcquireRequest struct {
	Lease   string `json:"lease"`
	Path    string `json:"path"`
	Kind    string `json:"kind,omitempty"`
	Limit   int    `json:"limit,omitempty"`
	Permits int    `json:"permits,omitempty"`
	Timeout string `json:"timeout,omitempty"`
	Try     bool   `json:"try,omitempty"`
	Owner   string `json:"owner,omitempty"`
	Host    string `json:"host,omitempty"`
	PID     int    `json:"pid,omitempty"`
}

// LeaseAcquireResponse answers a granted POST /v1/lease/acquire.
type LeaseAcquireResponse struct {
	Granted bool   `json:"granted"`
	ID      string `json:"id"`
	Lease   string `json:"lease"`
	Path    string `json:"path"`
	Node    string `json:"node"`
	Token   int64  `json:"token"`
}

// LeaseReleaseRequest is the body of POST /v1/lease/release.
type LeaseReleaseRequest struct {
	Lease string `json:"lease"`
	ID    string `json:"id"`
}

// RevokeResponse answers POST /v1/lease/revoke: how many of its locks were
// released (the others had been lost).
type RevokeResponse struct {
	Lease    string `json:"lease"`
	Revoked  bool   `json:"revoked"`
	Released int    `json:"released"`
}
