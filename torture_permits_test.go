//go:build linux

package zklock_test

import (
	"context"

	"github.com/zklock/zklock"
)

// permits takes every permit of the Semaphore at once (AcquireN), holds and
// releases them together; each permit's lease is a holder of the path in
// the ledger, so the checker counts them against the limit.
func (o *op) permits(ctx context.Context, s *zklock.Semaphore) {
	actx, cancel, dl := o.deadline(ctx)
	defer cancel()
	hold := o.holdTime()
	all := func(ctx context.Context) (*zklock.Lease, error) { return s.AcquireN(ctx, tortureSemLimit) }
	l, at, err := o.acquire(actx, dl, "permits", all)
	if err != nil {
		return
	}
	var recs []*leaseRec
	for _, part := range l.Parts() {
		r := o.granted("permits", part, at, hold, "")
		r.limit = tortureSemLimit
		recs = append(recs, r)
	}
	o.hold(ctx, l.Done(), hold)
	for _, r := range recs[1:] {
		o.tt.lg.ended(r, monoNow(), zklock.ErrReleased)
	}
	o.release(recs[0], l.Release)
}
