package wire

// contactMark is one of the Tap's two clocks of contact (any server's
// answer, and the leader's proven word): the send time, in ns since the
// Tap's epoch, of the newest request known to have been heard, and whether
// the loss clock waits to hear of a later one. The Tap's mu guards it.
type contactMark struct {
	at      int64
	watched bool
}

// advance moves the mark to t, if later; it reports whether the loss clock
// waited for that and must be woken.
func (m *contactMark) advance(t int64) bool {
	if t <= m.at {
		return false
	}
	m.at = t
	woke := m.watched
	m.watched = false
	return woke
}

// watch asks to hear of a send later than seen; it reports one that came
// already.
func (m *contactMark) watch(seen int64) bool {
	if m.at > seen {
		return true
	}
	m.watched = true
	return false
}
