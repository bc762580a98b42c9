package zklock

import (
	"sync"
)

// SessionState is the client's contact with ZooKeeper, in Curator's
// vocabulary, for code that must react to it without importing
// go-zookeeper.
type SessionState int

// The states, in the order a client usually goes through them.
const (
	// StateConnecting: no session yet.
	StateConnecting SessionState = iota
	// StateConnected: the first session is established.
	StateConnected
	// StateSuspended: the connection dropped; the session may live on, and
	// leases are still held until the loss deadline (or, on a client made
	// by NewClient, presumed lost at once: StateLost follows).
	StateSuspended
	// StateLost: no word from ZooKeeper for so long that the session must
	// be presumed expired; every lease has been presumed lost. The session
	// may yet turn out alive (StateReconnected), but the leases stay ended.
	StateLost
	// StateExpired: the server expired the session; its nodes are gone.
	// go-zookeeper opens a new session by itself (StateReconnected).
	StateExpired
	// StateReconnected: in contact again after StateSuspended, StateLost
	// or StateExpired (then with a new session).
	StateReconnected
	// StateClosed: Close was called.
	StateClosed
)

var stateNames = [...]string{"connecting", "connected", "suspended", "lost", "expired", "reconnected", "closed"}

func (s SessionState) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return "unknown"
	}
	return stateNames[s]
}

// stateFeed holds the state and tells subscribers of changes.
type stateFeed struct {
	mu    sync.Mutex
	state SessionState
	subs  map[chan SessionState]struct{}
}

func newStateFeed() *stateFeed { return &stateFeed{subs: make(map[chan SessionState]struct{})} }

func (f *stateFeed) get() SessionState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state
}

// set moves to s if the move makes sense from where the feed is (see move),
// and tells subscribers.
func (f *stateFeed) set(s SessionState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	next := move(f.state, s)
	if next == f.state {
		return
	}
	f.state = next
	for ch := range f.subs {
		replaceState(ch, next)
	}
}

// move is the state machine: where an observation s takes a feed in state
// from. A drop seen after the loss does not make the client suspended again,
// contact regained after a loss or an expiry is a reconnection, and a
// session is connected once, reconnected after.
func move(from, s SessionState) SessionState {
	switch {
	case from == StateClosed:
		return from
	case s == StateSuspended && (from == StateLost || from == StateExpired || from == StateConnecting):
		return from
	case s == StateLost && (from == StateExpired || from == StateConnecting):
		return from
	case s == StateConnected && from != StateConnecting:
		if from == StateConnected || from == StateReconnected {
			return from
		}
		return StateReconnected
	}
	return s
}

func (f *stateFeed) subscribe(ch chan SessionState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subs[ch] = struct{}{}
	ch <- f.state
}

func (f *stateFeed) unsubscribe(ch chan SessionState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.subs, ch)
}

// replaceState replaces what ch holds with s; only the feed (under its lock)
// and the subscription's last word send, so the send never blocks.
func replaceState(ch chan SessionState, s SessionState) {
	select {
	case <-ch:
	default:
	}
	ch <- s
}
