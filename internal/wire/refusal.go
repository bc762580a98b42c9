package wire

import (
	"crypto/x509"
	"errors"
	"net"
	"time"

	"github.com/go-zookeeper/zk"
)

// This file follows the connections refused for a cause that no retry
// changes while the configuration stays (a server certificate the client
// does not trust or that is not valid for the name, a client certificate the
// server refuses); go-zookeeper retries them like any other. Hopeless says
// when every server in the list has failed so, for Connect to give up then.

// refusals follows, per server address, whether its latest connection
// failed permanently, and the rounds go-zookeeper makes through its list.
type refusals struct {
	byAddr   map[string]error    // the latest failure, while it is permanent
	round    map[string]struct{} // addresses dialled in the current round
	hopeless chan struct{}       // closed once a whole round failed permanently
	cause    error               // the permanent failure that closed hopeless
}

func newRefusals() refusals {
	return refusals{byAddr: make(map[string]error), round: make(map[string]struct{}), hopeless: make(chan struct{})}
}

// outcome records how a connection to addr ended (nil: it was made); the
// Tap's mu is held.
func (r *refusals) outcome(addr string, err error) {
	if err != nil && permanentCause(err) {
		r.byAddr[addr] = err
		r.cause = err
		return
	}
	delete(r.byAddr, addr)
}

// next records that go-zookeeper is about to dial addr; retryStart says it
// went through its whole list since the last round began. The Tap's mu is
// held.
func (r *refusals) next(addr string, retryStart bool) {
	if retryStart {
		if len(r.round) > 0 && r.allRefused() && !isDone(r.hopeless) {
			close(r.hopeless)
		}
		clear(r.round)
	}
	r.round[addr] = struct{}{}
}

func (r *refusals) allRefused() bool {
	for addr := range r.round {
		if _, ok := r.byAddr[addr]; !ok {
			return false
		}
	}
	return true
}

// permanentCause reports a connection failure that no retry changes: the
// server's certificate is not trusted, not valid for the name, or invalid,
// or the server refused the client's (its TLS alert says so).
func permanentCause(err error) bool {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		op       *net.OpError
	)
	switch {
	case errors.As(err, &unknown), errors.As(err, &hostname), errors.As(err, &invalid):
		return true
	case errors.As(err, &op) && op.Op == "remote error" && op.Err != nil:
		return certificateAlerts[op.Err.Error()]
	}
	return false
}

// certificateAlerts are the TLS alerts (as crypto/tls words them: its alert
// type is unexported) by which a server refuses the client's certificate
// or the handshake's terms; a retry gets the same answer.
var certificateAlerts = map[string]bool{
	"tls: handshake failure":               true,
	"tls: bad certificate":                 true,
	"tls: unsupported certificate":         true,
	"tls: revoked certificate":             true,
	"tls: expired certificate":             true,
	"tls: unknown certificate":             true,
	"tls: unknown certificate authority":   true,
	"tls: access denied":                   true,
	"tls: certificate required":            true,
	"tls: protocol version not supported":  true,
	"tls: insufficient security level":     true,
	"tls: no application protocol":         true,
	"tls: encrypted client hello required": true,
}

// Hopeless is closed once a whole round of go-zookeeper's server list
// failed for causes that no retry changes; Diagnose then returns the cause.
// It needs go-zookeeper to use HostProvider.
func (w *Tap) Hopeless() <-chan struct{} { return w.refused.hopeless }

// HostProvider returns go-zookeeper's DNS host provider (zk.WithHostProvider),
// telling the Tap which address is dialled next and when a round through the
// list begins.
//
// go-zookeeper sleeps a second, and fails the requests queued meanwhile, at
// the start of each round. With one address (a load balancer, a standalone
// server) every reconnect starts a round, so every dropped connection cost a
// second of the session timeout; with several, the first attempt goes to the
// next server at once. The first attempt after a connection that worked now
// goes at once with one address too (see atOnce); any other starts the round
// as before.
func (w *Tap) HostProvider() zk.HostProvider {
	m := newMembers()
	w.mu.Lock()
	w.members = m
	w.mu.Unlock()
	return &hostRounds{members: m, w: w, now: w.now, connectedAt: -1}
}

// SetServers makes servers the addresses the client dials from its next
// connection on (the ensemble's membership changed); ErrNoHostProvider
// before HostProvider was called.
func (w *Tap) SetServers(servers []string) error {
	w.mu.Lock()
	m := w.members
	w.mu.Unlock()
	if m == nil {
		return errNoHostProvider
	}
	return m.replace(servers)
}

// Servers returns the addresses the client dials, as last given (nil before
// HostProvider was called).
func (w *Tap) Servers() []string {
	w.mu.Lock()
	m := w.members
	w.mu.Unlock()
	if m == nil {
		return nil
	}
	return m.list()
}

var errNoHostProvider = errors.New("zklock: the client dials through its own host provider")

// atOnceEvery is both how long a connection must last to count as having
// worked without a reply, and the least time between two attempts that skip
// go-zookeeper's sleep: that sleep itself (a second), so that no server
// behaviour makes the client reconnect faster than go-zookeeper's own
// back-off would, on average.
const atOnceEvery = time.Second

type hostRounds struct {
	*members
	w   *Tap
	now func() int64 // the Tap's clock (ns since its epoch); a test's in pure tests

	// Under w.mu.
	connectedAt int64 // when the newest connection's handshake was answered; -1: no connection since the last attempt
	lastAtOnce  int64 // when the last attempt that skipped the sleep was made
	wentAtOnce  bool  // some attempt skipped the sleep (lastAtOnce is set)
}

// Connected is called by go-zookeeper once a connection's handshake is
// answered, before any other request is sent on it.
func (h *hostRounds) Connected() {
	h.members.Connected()
	h.w.mu.Lock()
	h.connectedAt = h.now()
	h.w.mu.Unlock()
}

func (h *hostRounds) Next() (string, bool) {
	addr, retryStart := h.members.Next()
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	if retryStart && h.atOnce() {
		retryStart = false
	}
	h.connectedAt = -1
	h.w.refused.next(addr, retryStart)
	return addr, retryStart
}

// atOnce reports whether the attempt about to be made may skip
// go-zookeeper's sleep, and if so records it; w.mu is held.
//
// "Connected" is not "worked": go-zookeeper reports a connection as soon as
// its handshake is answered, and a server (or a proxy, or a load balancer)
// that answers the handshake and closes would have the client reconnect in
// a hot loop (2 000 connections and a full core in 3 s, issue 39). So the
// connection must have worked: a request sent after its handshake was
// answered (the Tap's contact is that late), or it lasted atOnceEvery. And
// an answer is not proof enough either (a server refusing the credentials
// sent again after the handshake answers that request with AUTH_FAILED and
// closes), so at most one attempt in atOnceEvery skips the sleep: a single
// blip is mended at once, and a server that keeps closing costs no more
// connections than go-zookeeper's own back-off allows.
func (h *hostRounds) atOnce() bool {
	if h.connectedAt < 0 {
		return false // the last attempt failed, or this is the first
	}
	now := h.now()
	worked := h.w.heard.at > h.connectedAt || now-h.connectedAt >= int64(atOnceEvery)
	if !worked || (h.wentAtOnce && now-h.lastAtOnce < int64(atOnceEvery)) {
		return false
	}
	h.lastAtOnce, h.wentAtOnce = now, true
	return true
}

// isDone reports whether ch is closed.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
