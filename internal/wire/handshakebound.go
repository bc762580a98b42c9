package wire

import "time"

// A connection whose connect response does not come is closed, so that
// go-zookeeper dials again. go-zookeeper waits for that response for 6.7
// session timeouts (ten of its receive timeouts), and a server that takes
// the connection and never answers holds the client there while the session
// expires behind it: ZooKeeper 3.8, starting up, refuses a connect request
// ("ZooKeeperServer not running") and its close of the socket can fail, so
// every client that reconnected in that moment waited past its session
// (measured: four clients with 15 s sessions, a standalone server restarted
// in a second, all four sessions expired and no client dialled again).

// firstHandshakeBound is the bound before any session was granted: Connect's
// own deadline usually ends the wait first.
const firstHandshakeBound = 10 * time.Second

// handshakeBound is how long a new connection may wait for its connect
// response: a third of the granted session timeout (the loss clock's scale,
// leaving the session time for a redial), never less than the dial timeout.
func (w *Tap) handshakeBound(dial time.Duration) time.Duration {
	w.mu.Lock()
	granted := w.granted
	w.mu.Unlock()
	if granted <= 0 {
		return max(dial, firstHandshakeBound)
	}
	return max(dial, granted/3)
}

// boundHandshake closes c after d unless a frame came back by then; the
// silence is what the client is told (errSilent), not the close.
func (c *wireConn) boundHandshake(d time.Duration) {
	time.AfterFunc(d, func() {
		if c.handshakeless() {
			c.silenced.Store(true)
			c.w.setErr(c.addr, errSilent)
			c.closeRaw()
		}
	})
}
