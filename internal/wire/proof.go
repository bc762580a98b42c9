package wire

import "time"

// The leader's word on the session. A server answers pings and reads by
// itself, so an answer proves only that this server heard the client. A
// follower cut off from its leader goes on answering for up to syncLimit ×
// tickTime, while the leader, hearing nothing of the session, expires it
// and lets another client take the lock. Only the leader's clock decides
// the expiry, so the loss deadline counts from what the leader is known to
// have heard.
//
// How a follower's session reaches the leader: the follower notes every
// request of the session (pings included) and sends the sessions it saw in
// its reply to the leader's ping, which the leader sends every tickTime/2;
// the leader then sets the expiry to (that moment + the timeout), rounded up
// to a tick. A connect (a new session, or one revalidated on another server)
// is touched by the leader itself before it is answered.
//
// So an answered request p is proven once a request k that only the leader
// can complete (a sync or a write) was sent at least ProofGap after p's
// answer, on the same connection, and k's answer came back: during that gap
// the leader sent the follower at least one ping; the follower answered it,
// with p's touch, before it forwarded k on the same ordered connection; and
// the leader answered k, so it read the touch first. The leader's expiry is
// then at least p's send time plus the timeout. ProofGap covers tickTime/2
// plus the delay of the leader's ping while the granted timeout is at least
// two ticks (ZooKeeper's default minSessionTimeout).

// ProofGap is how long after an answer a leader-completed request must be
// sent to prove that answer's touch reached the leader.
func ProofGap(granted time.Duration) time.Duration { return granted * 3 / 10 }

// answer is an answered request whose touch the leader may not know yet.
type answer struct{ sent, done int64 }

// leaderOps are the requests a server cannot complete without its leader:
// writes and sync. A reply to one without an error proves the connection to
// the leader worked after the request was sent.
func leaderOp(op int32) bool {
	switch op {
	case zkOpCreate, zkOpDelete, zkOpSetData, zkOpSetACL, zkOpSync, zkOpMulti,
		zkOpCreate2, zkOpCreateContainer, zkOpDeleteContainer, zkOpCreateTTL:
		return true
	}
	return false
}

// noteAnswer records the answer, at now, to a request sent at sent; byLeader
// says the leader completed it. c.mu and w.mu are held.
func (c *wireConn) noteAnswer(sent, now int64, byLeader bool) {
	w := c.w
	gap := int64(ProofGap(w.granted))
	if byLeader {
		for len(c.unproven) > 0 && c.unproven[0].done+gap <= sent {
			w.prove(c.unproven[0].sent)
			c.unproven = c.unproven[1:]
		}
	}
	// Forget what could no longer extend a deadline, and keep at most a few
	// answers per gap: a busy connection answers thousands a second.
	for len(c.unproven) > 0 && c.unproven[0].done < now-int64(w.granted) {
		c.unproven = c.unproven[1:]
	}
	if n := len(c.unproven); n == 0 || c.unproven[n-1].done+gap/8 <= now {
		c.unproven = append(c.unproven, answer{sent: sent, done: now})
	}
}

// newGrant takes a connect response's grant. A new session starts the
// leader's word afresh; within one session the smallest grant counts: a
// leader elected later restores the session with the timeout it was made
// with, not with a later, larger grant. w.mu is held.
func (w *Tap) newGrant(granted time.Duration, session int64) {
	if session != w.session {
		w.session, w.proven = session, contactMark{watched: w.proven.watched}
	} else {
		granted = min(granted, w.granted)
	}
	if granted != w.granted {
		w.granted = granted
		w.wakeClock()
	}
}

// prove moves the leader's contact to sent; w.mu is held.
func (w *Tap) prove(sent int64) {
	if w.proven.advance(sent) {
		w.wakeClock()
	}
}

// LeaderContact returns the latest moment the leader is known to have heard
// from the session, and that session's id: the loss deadline counts from it,
// for leases of that session only.
func (w *Tap) LeaderContact() (time.Time, int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.epoch.Add(time.Duration(w.proven.at)), w.session
}

// ProofDue returns when a sync sent on the current connection would prove
// the oldest answer the leader may not know of yet; false when there is
// none.
func (w *Tap) ProofDue() (time.Time, bool) {
	w.mu.Lock()
	c, gap := w.current, int64(ProofGap(w.granted))
	w.mu.Unlock()
	if c == nil {
		return time.Time{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.unproven) == 0 {
		return time.Time{}, false
	}
	return w.epoch.Add(time.Duration(c.unproven[0].done + gap)), true
}

// WatchLeaderContact makes the next proof of a send after seen wake the
// loss clock (Rearm), or wakes it at once if one came already.
func (w *Tap) WatchLeaderContact(seen time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.proven.watch(int64(seen.Sub(w.epoch))) {
		w.wakeClock()
	}
}
