package zklock

import "github.com/go-zookeeper/zk"

// The client's event goroutine and what a session event changes: the
// session (session.go's tracker), the state users see and, without the wire
// clock, the leases.

// onEvent updates the session from one event. It runs on go-zookeeper's
// goroutines (callback) or zklock's event goroutine and never blocks.
func (c *Client) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	states := c.clock.states
	switch ev.State {
	case zk.StateHasSession:
		c.session.sync()
		if !c.clock.silent() {
			states.set(StateConnected) // or reconnected, after a drop
		}
	case zk.StateExpired:
		c.session.sync()
		states.set(StateExpired)
	case zk.StateDisconnected:
		states.set(StateSuspended)
		if c.wire == nil {
			// Without the wire clock the earliest possible expiry is unknown:
			// leases are presumed lost at once (see NewClient).
			c.presumeLeasesLost()
			states.set(StateLost)
		}
	}
}

// eventLoop reads go-zookeeper's event channel until it closes, or until
// Close on a connection the caller owns. It never blocks on anything else:
// the user's handler runs on its own goroutine.
func (c *Client) eventLoop(events <-chan zk.Event, track bool) {
	defer close(c.eventsEnd)
	defer c.handler.close()
	for {
		var ev zk.Event
		var ok bool
		select {
		case ev, ok = <-events:
		case <-c.closing:
			if c.ownConn {
				// Drain until go-zookeeper closes the channel: its loop has ended then.
				for range events {
				}
				c.session.endConn()
			}
			return
		}
		if !ok {
			c.session.endConn()
			return
		}
		if track {
			c.onEvent(ev)
		}
		c.handler.push(ev)
	}
}
