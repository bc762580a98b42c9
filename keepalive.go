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
	conn    *zk.Conn
	wire    *wire.Tap
	asked   time.Duration        // the session timeout asked for, until one is granted
	until   func() time.Duration // how long until leases must be presumed lost (lossClock)
	spawn   func(func()) bool    // runs a goroutine Close waits for; false once closing
	closing <-chan struct{}

	mu      sync.Mutex
	demand  int       // leases held and acquisitions under way
	held    int       // of demand, the leases held: they want the denser cadence
	since   time.Time // when demand last rose from zero
	running bool      // the goroutine sending syncs runs: only while demand > 0
}

func newKeepAlive(conn *zk.Conn, w *wire.Tap, asked time.Duration, until func() time.Duration,
	spawn func(func()) bool, closing <-chan struct{}) *keepAlive {
	return &keepAlive{conn: conn, wire: w, asked: asked, until: until, spawn: spawn, closing: closing}
}

// want counts one more acquisition (held false) or held lease (held true)
// that needs the leader's word, starting the goroutine if none runs; the
// function returned (idempotent) ends it. A nil keepAlive (no wire) keeps
// nothing.
func (k *keepAlive) want(held bool) (done func()) {
	if k == nil {
		return func() {}
	}
	n := 0
	if held {
		n = 1
	}
	k.mu.Lock()
	k.demand++
	k.held += n
	if k.demand == 1 {
		k.since = time.Now()
	}
	if !k.running {
		k.running = k.spawn(k.run)
	}
	k.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			k.mu.Lock()
			k.demand--
			k.held -= n
			k.mu.Unlock()
		})
	}
}

// cadence is how long after a sync was answered the next one goes while the
// loss deadline is far: a quarter of a proof gap while a lease is held, so
// that each sync proves the one four before it and the leader's word is at
// most 1.25 gaps (0.375 T) and a few round trips old: a pause of the
// servers shorter than 0.8 T − 0.375 T ≈ 0.42 T (docs/guarantees.md says 0.4 T)
// ends no lease. Half a gap while only waiting: a waiter's grant waits for a
// fresh word anyway (grantgate.go), so it pays half as many syncs.
func (k *keepAlive) cadence(gap time.Duration) time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.held > 0 {
		return gap / 4
	}
	return gap / 2
}

// wantedSince is when demand last rose from zero.
func (k *keepAlive) wantedSince() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.since
}

// idle ends the goroutine when nothing needs it: it reports true, under the
// lock want takes, once demand is zero.
func (k *keepAlive) idle() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.demand > 0 {
		return false
	}
	k.running = false
	return true
}

// run sends the syncs while something needs them and the client is open.
// One sync at a time: it returns with its answer, or when go-zookeeper
// drops the connection (at the latest two thirds of the session timeout
// after the server went silent), or when Close closes it.
func (k *keepAlive) run() {
	var last time.Time // when the last sync was answered (or failed)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for !k.idle() {
		wait, send := k.next(last)
		if send && !isDone(k.closing) {
			_, err := k.conn.Sync("/") // its answer is read by the wire
			last = time.Now()
			if err == nil {
				continue
			}
			wait = k.gap() / 4 // no proof; and a closed connection fails at once: no spin
		}
		t.Reset(min(wait, k.gap()/4)) // a quarter gap at most: demand may have ended
		select {
		case <-t.C:
		case <-k.closing:
			return
		}
	}
}

// next says whether to send a sync now, or how long to wait before asking
// again. While the loss deadline is more than half a proof gap away, a sync
// goes a cadence after the previous one was answered; one sync a gap would
// prove the previous one but let the word grow 0.6 T old. Nearer the
// deadline (at the first grant after a quiet spell, or after slow answers,
// or a pause of the servers), a sync goes as soon as it proves anything,
// but never in the first eighth of a gap of a demand: an acquisition's
// create proves as much, and a client that takes a lock now and then for a
// moment sends no sync at all.
func (k *keepAlive) next(last time.Time) (time.Duration, bool) {
	gap := k.gap()
	due, ok := k.wire.ProofDue()
	if !ok {
		return gap / 4, false // no connection or nothing answered yet
	}
	if k.until() > gap/2 {
		due = maxTime(due, last.Add(k.cadence(gap)))
	}
	// Not in the first eighth of a gap after demand rose: the acquisition's own
	// create proves what a sync would, and a short hold needs none at all.
	due = maxTime(due, k.wantedSince().Add(gap/8))
	if wait := time.Until(due); wait > 0 {
		return wait, false
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
