package zklock

import (
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zklock/zklock/internal/wire"
)

// lossFraction is the part of the granted session timeout, counted from the
// last moment the server is known to have heard from this client, after which
// a lease is presumed lost. ZooKeeper expires a session no earlier than one
// timeout after it last heard from the client (it rounds expiry up to the next
// tick), and only then can another session be granted the lock; the 20%
// margin absorbs timer lateness and clock-rate differences.
const lossFraction = 0.8

// lossClock applies the loss rule for all of a client's leases at once: one
// goroutine and one timer per client, however many leases it holds, instead
// of one timer per lease. It sleeps until the wire's loss deadline (or a
// third of the granted session timeout, to notice a session change no event
// announced), and when the deadline has passed it closes its alarm: every
// lease's monitor wakes and applies the rule itself (Client.lossCheck). The
// wire wakes it early when a nap may outlast a deadline: the grant arrived
// or changed, or contact resumed after the deadline passed.
//
// Two clocks: the loss deadline counts from the leader's word on the
// session (the wire's LeaderContact, kept fresh by keepAlive while leases
// are held), since a follower cut off from its leader answers for seconds
// after the leader stopped hearing of the session; the state users see and
// whether ZooKeeper answers at all count from any server's answer.
type lossClock struct {
	wire        *wire.Tap // nil when the caller brought the connection
	conn        *zk.Conn
	session     *sessionTracker
	asked       time.Duration // the session timeout asked for (WithSessionTimeout)
	followerLag time.Duration // WithFollowerLag

	mu    sync.Mutex
	alarm chan struct{} // closed once leases must be presumed lost

	// states is the session state users see (sessionstate.go): the clock
	// says when contact is lost, and when it came back without an event.
	states *stateFeed
}

func newLossClock(conn *zk.Conn, w *wire.Tap, session *sessionTracker, states *stateFeed, o options) *lossClock {
	return &lossClock{wire: w, conn: conn, session: session, asked: o.sessionTimeout, followerLag: o.followerLag,
		alarm: make(chan struct{}), states: states}
}

// current returns the alarm a monitor waits on: a closed one only while a
// loss is due, so a monitor that found its lease still held after an alarm
// (contact came back meanwhile) gets a fresh one and does not spin.
func (k *lossClock) current() <-chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	if isDone(k.alarm) && !k.due() {
		k.alarm = make(chan struct{})
	}
	return k.alarm
}

// due reports that the wire's loss deadline has passed.
func (k *lossClock) due() bool { return k.wire != nil && k.untilLossDeadline() <= 0 }

// silent reports that no server has answered for as long as a lease would
// be trusted: the state users see is lost.
func (k *lossClock) silent() bool { return k.wire != nil && k.untilSilent() <= 0 }

// run ticks until closing closes.
func (k *lossClock) run(closing <-chan struct{}) {
	t := time.NewTimer(k.checkInterval())
	defer t.Stop()
	var rearm <-chan struct{} // nil without a wire: no grant to wait for
	if k.wire != nil {
		rearm = k.wire.Rearm()
	}
	for {
		select {
		case <-t.C:
		case <-rearm:
			t.Stop() // the nap was computed on an older grant or contact
		case <-closing:
			return
		}
		t.Reset(k.tick())
	}
}

// tick applies the loss rule once and returns how long to nap.
func (k *lossClock) tick() time.Duration {
	k.session.sync() // a session change that no event announced ends its leases
	var heard, proven time.Time
	if k.wire != nil {
		heard, _ = k.wire.LastContact()
		proven, _ = k.wire.LeaderContact()
	}
	k.mu.Lock()
	due := k.due()
	if due && !isDone(k.alarm) {
		close(k.alarm)
	}
	k.mu.Unlock()
	silent := k.silent()
	k.reportContact(silent)
	if !due && !silent {
		return k.checkInterval()
	}
	// Past a deadline: nothing to wait for until contact resumes, and the
	// wire says when it does (a new lease's deadline may come soon after).
	if silent {
		k.wire.WatchContact(heard)
	}
	if due {
		k.wire.WatchLeaderContact(proven)
	}
	return min(k.checkInterval(), k.granted()/3)
}

// reportContact moves the session state on what the clock saw: lost past
// the deadline, reconnected when contact came back on the same session
// (after a stall no event announces that).
func (k *lossClock) reportContact(silent bool) {
	switch {
	case silent:
		k.states.set(StateLost)
	case k.states.get() == StateLost && k.session.connSession() != 0:
		k.states.set(StateConnected) // from lost: reconnected
	}
}

// answering reports a client that can expect ZooKeeper's answer: it has a
// session on an open connection and, with the wire clock, has heard from
// the server recently enough that its leases still hold.
func (k *lossClock) answering() bool {
	if k.conn.State() != zk.StateHasSession {
		return false
	}
	return k.wire == nil || k.untilSilent() > 0
}

// untilLossDeadline returns how long until leases must be presumed lost:
// the loss fraction of the granted timeout after the leader last heard of
// the session.
func (k *lossClock) untilLossDeadline() time.Duration {
	proven, _ := k.wire.LeaderContact()
	return time.Until(proven.Add(k.trusted()))
}

// untilLossDeadlineOf is untilLossDeadline for a lease of session: a proof
// of another session (a new one, whose connect response the wire read
// before go-zookeeper took it) keeps none of its leases.
func (k *lossClock) untilLossDeadlineOf(session int64) time.Duration {
	proven, of := k.wire.LeaderContact()
	if of != session {
		return 0
	}
	return time.Until(proven.Add(k.trusted()))
}

// untilExpiryOf is how long until the session may have expired at the
// earliest: a whole granted timeout after the leader last heard of it (0
// for another session).
func (k *lossClock) untilExpiryOf(session int64) time.Duration {
	proven, of := k.wire.LeaderContact()
	if of != session {
		return 0
	}
	return max(time.Until(proven.Add(k.granted())), 0)
}

// untilSilent returns how long until the client has heard from no server
// for as long as a lease is trusted.
func (k *lossClock) untilSilent() time.Duration {
	heard, _ := k.wire.LastContact()
	return time.Until(heard.Add(k.trusted()))
}

// trusted is how long after the leader last heard of the session a lease
// is trusted: the loss fraction of the granted timeout, less the deprecated
// WithFollowerLag.
func (k *lossClock) trusted() time.Duration {
	return time.Duration(float64(k.granted())*lossFraction) - k.followerLag
}

// checkInterval is how long the loss clock sleeps between loss checks: until
// the loss deadline, and at most a third of the granted session timeout, so
// a session change that no event announced is noticed too. Before the grant
// is known no lease can exist; the wire wakes the clock when it arrives.
func (k *lossClock) checkInterval() time.Duration {
	d := k.granted() / 3
	if k.wire != nil {
		if until := k.untilLossDeadline(); until > 0 {
			d = min(d, until)
		}
		if until := k.untilSilent(); until > 0 {
			d = min(d, until)
		}
	}
	return max(d, time.Millisecond)
}

// granted is the session timeout the server granted, or the one asked for
// when it is not known (NewClient, or before the first session, when no
// lease can exist). Every figure derived from the session timeout uses it.
func (k *lossClock) granted() time.Duration {
	if k.wire != nil {
		if _, granted := k.wire.LastContact(); granted > 0 {
			return granted
		}
	}
	return k.asked
}
