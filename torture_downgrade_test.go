//go:build linux

package zklock_test

import (
	"context"
	"errors"
	"time"

	"github.com/zklock/zklock"
)

// downgrade takes the RWMutex as a writer, holds, downgrades the write lease
// to a read lease (RWMutex.Downgrade), holds and releases. As for a Curator
// peer's downgrade, the writer's record ends before the call and the
// reader's starts when it returns: no writer may enter in between, and the
// checker sees every other holder against both records.
func (o *op) downgrade(ctx context.Context, rw *zklock.RWMutex) {
	actx, cancel, dl := o.deadline(ctx)
	defer cancel()
	hold := o.holdTime()
	w, at, err := o.acquire(actx, dl, "write", rw.AcquireWrite)
	if err != nil {
		return
	}
	wr := o.granted("write", w, at, hold, "")
	o.hold(ctx, w.Done(), hold)
	o.tt.lg.ended(wr, monoNow(), zklock.ErrReleased)
	dctx, dcancel := context.WithTimeout(context.Background(), 3*time.Second)
	start := monoNow()
	r, err := rw.Downgrade(dctx, w)
	dcancel()
	at = monoNow()
	o.tt.returned(o.who+" downgrade", start+mono(3*time.Second), at, err)
	switch {
	case err == nil:
	case errors.Is(err, zklock.ErrLockLost), errors.Is(err, zklock.ErrHoldLimit), errors.Is(err, zklock.ErrClosed):
		o.tt.counts.add("downgrade.lost")
		return
	case errors.Is(err, zklock.ErrUnreachable), errors.Is(err, context.DeadlineExceeded):
		o.tt.counts.add("downgrade.unreachable")
		o.release(wr, w.Release) // the write lease is kept: let it go
		return
	default:
		o.tt.lg.violate("%s: Downgrade of %s failed: %v", o.who, wr.node, err)
		if r != nil {
			o.release(wr, r.Release)
		}
		o.release(wr, w.Release)
		return
	}
	rr := o.granted("downgrade", r, at, o.holdTime(), "")
	rr.shared = true
	o.hold(ctx, r.Done(), time.Duration(rr.planned-rr.start))
	o.release(rr, r.Release)
}
