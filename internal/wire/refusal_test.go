package wire

import (
	"crypto/x509"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
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
// queued requests failed) before every attempt. The first attempt after a
// connection that worked goes at once; one after a failed attempt, or after
// a connection whose handshake alone was answered and that did not last,
// starts the round; and at most one attempt a second goes at once.
func TestPureFirstAttemptAfterAConnectionThatWorkedGoesAtOnce(t *testing.T) {
	w := New(Config{})
	h := w.HostProvider().(*hostRounds)
	var now int64
	h.now = func() int64 { return now }
	if err := h.Init([]string{"127.0.0.1:2181"}); err != nil {
		t.Fatal(err)
	}
	const ms = int64(time.Millisecond)
	steps := []struct {
		what       string
		connected  int64 // Connected is called at this time (ms) before this Next; 0: not
		answered   int64 // a request sent at this time (ms) after the handshake was answered; 0: none
		at         int64 // Next is called at this time (ms)
		retryStart bool
	}{
		{"the first dial", 0, 0, 1, false},
		{"it failed: a new round", 0, 0, 10, true},
		{"worked (a request answered), then dropped: at once", 1000, 1005, 1010, false},
		{"that attempt failed: a new round", 0, 0, 1020, true},
		{"the handshake answered, then closed: a new round", 2030, 0, 2040, true},
		{"again (the Tap's contact is older than the handshake)", 3040, 0, 3050, true},
		{"no reply but lasted a second: at once", 4050, 0, 5060, false},
		{"worked, but an attempt went at once 20 ms ago: a new round", 5070, 5071, 5080, true},
		{"worked, the last attempt at once a second ago: at once", 6070, 6075, 6080, false},
	}
	for _, s := range steps {
		if s.connected != 0 {
			now = s.connected * ms
			h.Connected()
		}
		if s.answered != 0 {
			w.mu.Lock()
			w.heard.at = s.answered * ms
			w.mu.Unlock()
		}
		now = s.at * ms
		if _, got := h.Next(); got != s.retryStart {
			t.Fatalf("%s: retryStart %v, want %v", s.what, got, s.retryStart)
		}
	}
}
