package wire

import (
	"crypto/x509"
	"errors"
	"net"
	"sync/atomic"

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
// goes at once with one address too; a failed one starts the round as before.
func (w *Tap) HostProvider() zk.HostProvider {
	return hostRounds{zk.NewDNSHostProvider(), w, new(atomic.Bool)}
}

type hostRounds struct {
	*zk.DNSHostProvider
	w         *Tap
	connected *atomic.Bool // a connection was made, and no attempt has followed it
}

func (h hostRounds) Connected() {
	h.DNSHostProvider.Connected()
	h.connected.Store(true)
}

func (h hostRounds) Next() (string, bool) {
	addr, retryStart := h.DNSHostProvider.Next()
	if h.connected.Swap(false) {
		retryStart = false
	}
	h.w.mu.Lock()
	h.w.refused.next(addr, retryStart)
	h.w.mu.Unlock()
	return addr, retryStart
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
