package wire

import (
	"crypto/x509"
	"errors"
	"net"
	"syscall"
	"testing"
)

var (
	errUntrusted = tlsCause("TLS handshake with a", "a", x509.UnknownAuthorityError{})
	errCertAlert = tlsCause("TLS", "", &net.OpError{Op: "remote error", Err: alertText("tls: certificate required")})
	errTransient = &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}
)

type alertText string

func (a alertText) Error() string { return string(a) }

// Connect gives up only after a whole round of go-zookeeper's list failed
// permanently; a transient failure or a connection made anywhere in the
// round keeps it trying.
func TestPureRefusalsNeedAWholeRound(t *testing.T) {
	type step struct {
		addr string
		err  error
	}
	cases := map[string]struct {
		round    []step
		hopeless bool
	}{
		"one server, untrusted":        {[]step{{"a", errUntrusted}}, true},
		"two servers, both refused":    {[]step{{"a", errUntrusted}, {"b", errCertAlert}}, true},
		"one of two transient":         {[]step{{"a", errUntrusted}, {"b", errTransient}}, false},
		"the same address twice":       {[]step{{"a", errUntrusted}, {"a", errUntrusted}}, true},
		"a connection made, then none": {[]step{{"a", nil}, {"b", errUntrusted}}, false},
		"other alert":                  {[]step{{"a", &net.OpError{Op: "remote error", Err: alertText("tls: internal error")}}}, false},
	}
	for name, tc := range cases {
		r := newRefusals()
		for _, s := range tc.round {
			r.next(s.addr, false)
			r.outcome(s.addr, s.err)
		}
		r.next(tc.round[0].addr, true) // the next round begins
		if got := isDone(r.hopeless); got != tc.hopeless {
			t.Errorf("%s: hopeless %v, want %v", name, got, tc.hopeless)
		}
	}
}

func TestPurePermanentCauseSeesThroughWrapping(t *testing.T) {
	if !permanentCause(errors.Join(errors.New("x"), errUntrusted)) || !permanentCause(errCertAlert) {
		t.Fatal("a wrapped certificate error is not permanent")
	}
	if permanentCause(errTransient) || permanentCause(errSilent) {
		t.Fatal("a transient error is permanent")
	}
}

// With one address, go-zookeeper starts a round (a second's sleep, and the
// queued requests failed) before every attempt; the first attempt after a
// connection that worked goes at once, and a failed one starts the round.
func TestPureFirstAttemptAfterAConnectionGoesAtOnce(t *testing.T) {
	h := New(Config{}).HostProvider()
	if err := h.Init([]string{"127.0.0.1:2181"}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		connected  bool // Connected is called before this Next
		retryStart bool
	}{
		{false, false}, // the first dial
		{false, true},  // it failed: a new round
		{true, false},  // connected, then dropped: at once
		{false, true},  // that attempt failed: a new round
		{true, false},
		{true, false},
	}
	for i, s := range steps {
		if s.connected {
			h.Connected()
		}
		if _, got := h.Next(); got != s.retryStart {
			t.Fatalf("step %d: retryStart %v, want %v", i, got, s.retryStart)
		}
	}
}
