package zklock

import (
	"bytes"
	"context"
	"errors"
)

// Observe follows the election's leader: it sends the leader now, then the
// leader after every change (another node leads, the leader proclaims a new
// value, or nobody leads: a zero Leader). The channel holds one value, and
// a reader that falls behind gets the latest, never a stale one: the last
// change is never missed. It costs one watch at a time per observer, on the
// leader's node (on the path while nobody leads), and one listing and one
// read per change. Through an outage it keeps trying, and it reports the
// leader again once ZooKeeper answers. The channel is closed when ctx ends
// or the client closes.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	out := make(chan Leader, 1)
	c := e.c
	if !c.track() {
		close(out)
		return out
	}
	go func() {
		defer c.wg.Done()
		defer close(out)
		e.observe(ctx, out)
	}()
	return out
}

// observe reads the leader with a watch, publishes it if it changed, and
// waits for the watch, until ctx ends or the client closes.
func (e *Election) observe(ctx context.Context, out chan Leader) {
	c := e.c
	var last Leader
	first := true
	r := c.retrier(ctx, nil)
	for {
		ld, err := e.readLeader(ctx, true)
		switch {
		case errors.Is(err, errLookAgain):
			continue
		case err != nil && stopped(err):
			return
		case err != nil:
			if classify(err) != errConnection {
				c.log.Warn("zklock: observing leader", "path", e.path, "err", err)
			}
			if r.wait() != nil {
				return
			}
			continue
		}
		r = c.retrier(ctx, nil) // an answer: the next outage backs off from the start
		if first || !sameLeader(last, ld.leader) {
			publish(out, ld.leader)
			last, first = ld.leader, false
		}
		select {
		case <-ld.changed: // any event: the leader changed, or the watch ended (read again)
		case <-ctx.Done():
			return
		case <-c.closing:
			return
		case <-c.session.ended:
			return
		}
	}
}

// publish replaces what out holds with ld; observe is out's only sender, so
// the send never blocks.
func publish(out chan Leader, ld Leader) {
	select {
	case <-out:
	default:
	}
	out <- ld
}

func sameLeader(a, b Leader) bool { return a.Node == b.Node && bytes.Equal(a.Data, b.Data) }
