package zklock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/go-zookeeper/zk"
)

// Breaking a holder past its published hold limit (WithBreakOverdue).
//
// A holder with a hold limit (WithMaxHold) stamps its record once granted:
// it writes the record back marked Held, so the node's modification time is
// a moment on the server's clock no earlier than the grant. Its own timer
// ends the lease at the grant plus the limit; a holder whose timer cannot
// run (a paused process, a frozen VM) keeps its node. A waiter right behind
// it, opted in, deletes the node once the server's clock is surely past the
// stamp plus the limit plus a grace (overdueGrace of the session timeout):
// the server's time is bounded from below by the creation time of the
// waiter's own node plus the local time elapsed since that was read, so a
// waiter never breaks early, whatever the hosts' clocks say.
//
// The broken holder, should it run again, may still act before it notices;
// only fencing tokens stop its writes (docs/scheduled-jobs.md).

// overdueGrace is the part of the session timeout a waiter adds to a
// holder's limit before breaking it: the holder's own end normally comes
// first.
const overdueGrace = 0.5

// serverClock is a lower bound of the server's time: a node's creation time
// (server ms) and the local moment its stat was read, later than that.
type serverClock struct {
	base  int64     // server ms
	local time.Time // read at or after base
}

func (k serverClock) now() time.Time {
	return time.UnixMilli(k.base).Add(time.Since(k.local))
}

// overdueIn says how long until the holder whose node has data and stat
// may be broken, and whether it publishes a limit and a grant stamp at all.
func (q *queueNode) overdueIn(ctx context.Context, data []byte, stat *zk.Stat) (time.Duration, bool, error) {
	o, ok := parseOwner(data)
	if !ok || !o.Held || o.MaxHold <= 0 {
		return 0, false, nil
	}
	if q.clock.local.IsZero() {
		own, err := call(ctx, q.c, func() (*zk.Stat, error) {
			_, s, err := q.c.conn.Exists(q.full())
			return s, err
		})
		if err != nil || own == nil {
			return 0, false, err
		}
		q.clock = serverClock{base: own.Ctime, local: time.Now()}
	}
	grace := time.Duration(float64(q.c.grantedTimeout()) * overdueGrace)
	if o.MaxHold > math.MaxInt64-grace {
		return 0, false, nil // "no limit" spelled as a huge one: never overdue
	}
	deadline := time.UnixMilli(stat.Mtime).Add(o.MaxHold + grace)
	return deadline.Sub(q.clock.now()), true, nil
}

// breakOverdue deletes the holder's node pred, if it is still the version
// read (a holder that woke and wrote again is left alone).
func (q *queueNode) breakOverdue(ctx context.Context, pred string, version int32) error {
	c := q.c
	_, err := call(ctx, c, func() (struct{}, error) { return struct{}{}, c.conn.Delete(pred, version) })
	switch {
	case err == nil:
		c.log.Warn("zklock: broke a holder past its hold limit", "node", pred)
		return nil
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrBadVersion):
		return nil // gone, or it wrote again: the wait goes on as usual
	}
	return fmt.Errorf("zklock: breaking %s past its hold limit: %w", pred, err)
}

// watchOverdue, for a waiter that may break overdue holders and whose turn
// comes when pred goes, breaks pred now if it is overdue, or returns a timer
// for when it will be (the wait then looks again). A failed read or delete
// is tried again a quarter of the session timeout later.
func (q *queueNode) watchOverdue(ctx context.Context, pred string, last bool, data []byte, stat *zk.Stat) (<-chan time.Time, func() bool) {
	none := func() bool { return false }
	if !q.c.opts.breakOverdue || !last {
		return nil, none
	}
	in, limited, err := q.overdueIn(ctx, data, stat)
	switch {
	case err != nil:
		in = q.c.grantedTimeout() / 4 // no bound on the server's time yet: look again later
	case !limited:
		return nil, none
	case in <= 0:
		err := q.breakOverdue(ctx, pred, stat.Version)
		if err == nil {
			return nil, none // its deletion wakes the wait
		}
		q.c.log.Warn("zklock: could not break a holder past its hold limit; trying again", "node", pred, "err", err)
		in = q.c.grantedTimeout() / 4
	}
	t := time.NewTimer(in)
	return t.C, t.Stop
}
