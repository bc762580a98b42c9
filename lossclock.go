package zklock

import (
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// lossClock applies the loss rule for all of a client's leases at once: one
// goroutine and one timer per client, however many leases it holds, instead
// of one timer per lease. It sleeps until the wire's loss deadline (or a
// third of the granted session timeout, to notice a session change no event
// announced), and when the deadline has passed it closes its alarm: every
// lease's monitor wakes and applies the rule itself (Client.lossCheck). The
// wire wakes it early when a nap may outlast a deadline: the grant arrived
// or changed, or contact resumed after the deadline passed.
type lossClock struct {
	c *Client

	mu    sync.Mutex
	alarm chan struct{} // closed once leases must be presumed lost

	// states is the session state users see (sessionstate.go): the clock
	// says when contact is lost, and when it came back without an event.
	states *stateFeed
}

func newLossClock(c *Client) *lossClock {
	return &lossClock{c: c, alarm: make(chan struct{}), states: newStateFeed()}
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
func (k *lossClock) due() bool { return k.c.wire != nil && k.untilLossDeadline() <= 0 }

// run ticks until the client closes; Close waits for it (c.wg).
func (k *lossClock) run() {
	c := k.c
	defer c.wg.Done()
	t := time.NewTimer(k.checkInterval())
	defer t.Stop()
	var rearm <-chan struct{} // nil without a wire: no grant to wait for
	if c.wire != nil {
		rearm = c.wire.Rearm()
	}
	for {
		select {
		case <-t.C:
		case <-rearm:
			t.Stop() // the nap was computed on an older grant or contact
		case <-c.closing:
			return
		}
		t.Reset(k.tick())
	}
}

// tick applies the loss rule once and returns how long to nap.
func (k *lossClock) tick() time.Duration {
	c := k.c
	c.session.sync() // a session change that no event announced ends its leases
	var contact time.Time
	if c.wire != nil {
		contact, _ = c.wire.LastContact()
	}
	k.mu.Lock()
	due := k.due()
	if due && !isDone(k.alarm) {
		close(k.alarm)
	}
	k.mu.Unlock()
	k.reportContact(due)
	if !due {
		return k.checkInterval()
	}
	// Past the deadline: nothing to wait for until contact resumes, and the
	// wire says when it does (a new lease's deadline may come soon after).
	c.wire.WatchContact(contact)
	return c.grantedTimeout() / 3
}

// reportContact moves the session state on what the clock saw: lost past
// the deadline, reconnected when contact came back on the same session
// (after a stall no event announces that).
func (k *lossClock) reportContact(due bool) {
	c := k.c
	switch {
	case due:
		k.states.set(StateLost)
	case k.states.get() == StateLost && c.session.connSession() != 0:
		k.states.set(StateConnected) // from lost: reconnected
	}
}

// answering reports a client that can expect ZooKeeper's answer: it has a
// session on an open connection and, with the wire clock, has heard from
// the server recently enough that its leases still hold.
func (k *lossClock) answering() bool {
	c := k.c
	if c.conn.State() != zk.StateHasSession {
		return false
	}
	return c.wire == nil || k.untilLossDeadline() > 0
}

// untilLossDeadline returns how long until leases must be presumed lost.
func (k *lossClock) untilLossDeadline() time.Duration {
	c := k.c
	contact, _ := c.wire.LastContact()
	return time.Until(contact.Add(time.Duration(float64(c.grantedTimeout())*lossFraction) - c.opts.followerLag))
}

// checkInterval is how long the loss clock sleeps between loss checks: until
// the loss deadline, and at most a third of the granted session timeout, so
// a session change that no event announced is noticed too. Before the grant
// is known no lease can exist; the wire wakes the clock when it arrives.
func (k *lossClock) checkInterval() time.Duration {
	d := k.c.grantedTimeout() / 3
	if k.c.wire != nil {
		d = min(d, k.untilLossDeadline())
	}
	return max(d, time.Millisecond)
}
