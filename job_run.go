package zklock

// A run under way (JobRun): its lease, its end and the cause recorded, the
// hold limit's stop, and the release.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
)

// Lease returns the lease the run holds the job's lock by: watch Done, pass
// its Token to what the job writes.
func (r *JobRun) Lease() *Lease { return r.lease }

// Finish is End with the cause ferr implies: CauseError for an error of fn's
// own; CauseHoldLimit or CauseLost if the lease ended.
func (r *JobRun) Finish(ctx context.Context, ferr error) (Run, error) {
	return r.End(ctx, "", ferr)
}

// End records the run's end and releases the lock, and returns the run and
// ferr: succeeded if ferr is nil, else failed with ferr's message and cause
// ("" lets End choose: CauseHoldLimit or CauseLost if the lease has ended,
// else CauseError; zklock exec passes CauseSignal for a command it stopped
// on a signal).
//
// While the lease holds, the end is a guarded write (Lease.Multi). A run
// with a hold limit (WithMaxHold) records its end by the limit a moment
// before it (a tenth of the limit, at most a second), while it still holds:
// an End before the limit writes the true end over it. A lease lost before
// End (its session expired, its node deleted) cannot guard a write: End
// then writes the end only if the record is still this run's start, with a
// write checked against the version this run last wrote, which lands only if
// no other process has started or checked the job since. If the lease has
// ended, the error matches the lease's end and wraps ferr. Its time bound is
// two requests' (each within ctx and the session timeout), then a Release of
// at most the cleanup timeout.
func (r *JobRun) End(ctx context.Context, cause string, ferr error) (Run, error) {
	defer r.release(ctx)
	r.mu.Lock()
	r.ended = true
	r.mu.Unlock()
	if r.limit != nil && !r.limit.Stop() {
		<-r.limited // the hold-limit record is being written: let it land first
	}
	run := r.run
	run.Outcome = "succeeded"
	if ferr != nil {
		run.Outcome, run.Error = "failed", ferr.Error()
	}
	lost := r.lease.Err()
	switch {
	case ferr == nil && lost == nil:
	case cause != "":
		run.Cause = cause
	case errors.Is(lost, ErrHoldLimit):
		run.Cause = CauseHoldLimit
	case lost != nil:
		run.Cause = CauseLost
	default:
		run.Cause = CauseError
	}
	if lost != nil {
		if run.Outcome == "succeeded" { // the end came after the lease's: it ran unguarded for a moment
			run.Outcome, run.Error = "failed", lost.Error()
			run.Cause = CauseLost
			if errors.Is(lost, ErrHoldLimit) {
				run.Cause = CauseHoldLimit
			}
		}
		r.mu.Lock()
		recorded := r.limitOK
		r.mu.Unlock()
		if !recorded {
			if end, err := r.writeLost(ctx, run); err == nil {
				run.End = end
			}
		}
		return run, joinFnErr(lost, ferr)
	}
	end, err := r.write(ctx, run)
	if err != nil {
		return run, joinFnErr(err, ferr)
	}
	run.End = end
	return run, ferr
}

// armHoldLimit sets the timer that records the run's end by the hold limit
// a moment before the limit ends the lease (see End).
func (r *JobRun) armHoldLimit() {
	l, n := r.lease, r.lease.onNode()
	limit := l.c.opts.maxHold
	if limit <= 0 || n.q.brief {
		return
	}
	margin := min(limit/10, time.Second)
	r.limited = make(chan struct{})
	r.limit = time.AfterFunc(time.Until(n.since.Add(limit-margin)), func() {
		defer close(r.limited)
		r.mu.Lock()
		ended := r.ended
		r.mu.Unlock()
		if ended || l.Err() != nil {
			return
		}
		run := r.run
		run.Outcome, run.Cause = "failed", CauseHoldLimit
		run.Error = fmt.Sprintf("stopped by the hold limit: held for %v", limit)
		ctx, cancel := context.WithTimeout(context.Background(), margin)
		defer cancel()
		if _, err := r.write(ctx, run); err == nil {
			r.mu.Lock()
			r.limitOK = true
			r.mu.Unlock()
		}
	})
}

// joinFnErr is err, wrapping fn's error if there is one.
func joinFnErr(err, ferr error) error {
	if ferr == nil {
		return err
	}
	return fmt.Errorf("%w (fn: %w)", err, ferr)
}

// release lets the job's lock go, within the cleanup timeout.
func (r *JobRun) release(ctx context.Context) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.job.m.c.opts.cleanupTimeout)
	defer cancel()
	_ = r.lease.Release(rctx)
}

// write records run with a guarded write and returns the write's server
// time, remembering the record's version.
func (r *JobRun) write(ctx context.Context, run Run) (time.Time, error) {
	res, err := r.lease.Multi(ctx, &zk.SetDataRequest{Path: r.job.record, Data: encodeRun(run, r.success), Version: -1})
	if err != nil {
		return time.Time{}, err
	}
	r.mu.Lock()
	r.version = res[0].Stat.Version
	r.mu.Unlock()
	return time.UnixMilli(res[0].Stat.Mtime), nil
}

// writeLost records the end of a run whose lease has ended, only if the
// record is still as this run last wrote it (its version unchanged).
func (r *JobRun) writeLost(ctx context.Context, run Run) (time.Time, error) {
	c := r.job.m.c
	ctx, scope, err := c.begin(ctx, true)
	if err != nil {
		return time.Time{}, err
	}
	defer scope.end()
	r.mu.Lock()
	version := r.version
	r.mu.Unlock()
	data := encodeRun(run, r.success)
	stat, err := call(ctx, c, func() (*zk.Stat, error) { return c.conn.Set(r.job.record, data, version) })
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMilli(stat.Mtime), nil
}
