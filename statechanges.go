package zklock

import "context"

// What users read of the session state (sessionstate.go's feed, which the
// loss clock and the event goroutine move).

// State returns the client's session state now.
func (c *Client) State() SessionState {
	if c.isClosed() {
		return StateClosed
	}
	return c.clock.states.get()
}

// StateChanges sends the session state now, then every change, until ctx
// ends or the client closes (it sends StateClosed, then closes the channel).
// The channel holds one value: a reader that falls behind skips to the
// latest state, never a stale one.
func (c *Client) StateChanges(ctx context.Context) <-chan SessionState {
	out := make(chan SessionState, 1)
	if !c.track() {
		out <- StateClosed
		close(out)
		return out
	}
	f := c.clock.states
	f.subscribe(out)
	go func() {
		defer c.wg.Done()
		select {
		case <-ctx.Done():
		case <-c.closing:
		}
		f.unsubscribe(out)
		if c.isClosed() {
			replaceState(out, StateClosed)
		}
		close(out)
	}()
	return out
}
