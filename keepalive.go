package zklock

import (
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zklock/zklock/internal/wire"
)

// keepAlive keeps the leader's word on the session fresh while the client
// holds a lease or waits for one. A lease's loss deadline counts from the
// last moment the leader is known to have heard from the session
// (internal/wire's proof.go): a server's own answers prove nothing, since a
// follower cut off from its leader goes on answering. Only a request the
// leader completes, sent a proof gap after an answer, proves that answer;
// writes do it on their own, and when none came the keep-alive sends a sync
// once the oldest unproven answer can be proven. With nothing held or
// awaited it sends nothing.
type keepAlive struct {
	conn  *zk.Conn
	wire  *wire.Tap
	asked time.Duration        // the session timeout asked for, until one is granted
	until func() time.Duration // how long until leases must be presumed lost (lossClock)

	mu     sync.Mutex
	demand int           // leases held and acquisitions under way
	wake   chan struct{} // one pending wake-up: demand rose from zero
}

func newKeepAlive(conn *zk.Conn, w *wire.Tap, asked time.Duration, until func() time.Duration) *keepAlive {
	return &keepAlive{conn: conn, wire: w, asked: asked, until: until, wake: make(chan struct{}, 1)}
}

// want counts one more lease or acquisition that needs the leader's word;
// the function returned (idempotent) ends it. A nil keepAlive (no wire)
// keeps nothing.
func (k *keepAlive) want() (done func()) {
	if k == nil {
		return func() {}
	}
	k.mu.Lock()
	k.demand++
	if k.demand == 1 {
		select {
		case k.wake <- struct{}{}:
		default:
		}
	}
	k.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			k.mu.Lock()
			k.demand--
			k.mu.Unlock()
		})
	}
}

func (k *keepAlive) wanted() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.demand > 0
}

// run sends the syncs until closing closes. One sync at a time: it returns
// with its answer, or when go-zookeeper drops the connection (at the latest
// two thirds of the session timeout after the server went silent), or when
// Close closes it.
func (k *keepAlive) run(closing <-chan struct{}) {
	var last time.Time // when the last sync was answered (or failed)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		wait, send := k.next(last)
		if send && !isDone(closing) {
			_, err := k.conn.Sync("/") // its answer is read by the wire
			last = time.Now()
			if err == nil {
				continue
			}
			wait = k.gap() / 4 // no proof; and a closed connection fails at once: no spin
		}
		t.Reset(wait)
		select {
		case <-t.C:
		case <-k.wake:
		case <-closing:
			return
		}
	}
}

// next says whether to send a sync now, or how long to wait before asking
// again. While the loss deadline is more than half a proof gap away, a sync
// goes a gap after the previous one was answered, so that it proves that
// one: one sync per gap and round trip, whatever else the connection
// answers. Nearer the deadline (at the first grant after a quiet spell, or
// after slow answers), a sync goes as soon as it proves anything.
func (k *keepAlive) next(last time.Time) (time.Duration, bool) {
	gap := k.gap()
	if !k.wanted() {
		return time.Hour, false // until want wakes it
	}
	due, ok := k.wire.ProofDue()
	if !ok {
		return gap / 4, false // no connection or nothing answered yet
	}
	if k.until() > gap/2 {
		due = maxTime(due, last.Add(gap))
	}
	if wait := time.Until(due); wait > 0 {
		return min(wait, gap/4), false // the deadline moves as proofs come
	}
	return 0, true
}

// gap is the wire's proof gap for the granted (else the asked) timeout.
func (k *keepAlive) gap() time.Duration {
	granted := k.asked
	if _, g := k.wire.LastContact(); g > 0 {
		granted = g
	}
	return wire.ProofGap(granted)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
