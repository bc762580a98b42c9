package zklock

import (
	"context"
	"errors"
	"time"

	"github.com/go-zookeeper/zk"
)

// Reset clears the job's record, so that the next Run (or 'zklock exec
// --once-per') runs the job even in a period that was run already: for an
// operator whose run failed for a passing reason, or who wants the job run
// again at once. It takes the job's lock without waiting (TryAcquire: an
// error matching ErrLocked while a run, a check or another reset holds it)
// and writes, with a guarded write checked against the version it read, a
// record with the outcome "reset", who reset it (the caller's Owner, named
// with ContextWithOwner) and when (the server's clock), and the last success
// as the record knew it. The reset record is of the later of the replaced
// run's period and the one the server's clock gives at the reset, and the
// next start runs that period or a later one the clock gives, never an
// earlier one (a leader whose clock is behind gives an earlier one): no
// record moves back to an earlier period. It returns the run it replaced
// (the zero Run if none) and the reset record. Its time bound is TryAcquire's, then two
// requests' (each within ctx and the session timeout), then a Release's.
func (j *Job) Reset(ctx context.Context) (replaced, reset Run, err error) {
	l, err := j.m.TryAcquire(ctx)
	if err != nil {
		return Run{}, Run{}, err
	}
	r := &JobRun{job: j, lease: l}
	defer r.release(ctx)
	for attempt := 0; ; attempt++ {
		replaced, reset, err = j.reset(ctx, r)
		if errors.Is(err, zk.ErrBadVersion) && attempt < 2 {
			continue // a runner that lost the lock recorded its end meanwhile
		}
		return replaced, reset, err
	}
}

// reset writes the reset record over the one it reads, under r's lease.
func (j *Job) reset(ctx context.Context, r *JobRun) (replaced, reset Run, err error) {
	rec, err := j.read(ctx)
	if err != nil {
		return Run{}, Run{}, err
	}
	reset = Run{Period: j.period, Calendar: j.schedule(), Owner: r.lease.onNode().q.owner, Outcome: "reset"}
	if rec.run.Period > 0 {
		// the replaced record's period and calendar, and its slot: the
		// reset record never moves back to an earlier period than it
		reset.Period, reset.Calendar, reset.Slot = rec.run.Period, rec.run.Calendar, rec.run.Slot
	}
	data := encodeRun(reset, rec.success)
	var ops []any
	if rec.stat == nil {
		ops = []any{&zk.CreateRequest{Path: j.record, Data: data, Acl: j.m.c.opts.acl}, &zk.SetDataRequest{Path: j.record, Data: data, Version: -1}}
	} else {
		ops = []any{&zk.SetDataRequest{Path: j.record, Data: data, Version: rec.stat.Version}}
	}
	res, err := r.lease.Multi(ctx, ops...)
	if err != nil {
		return rec.run, Run{}, err
	}
	at := time.UnixMilli(res[len(res)-1].Stat.Mtime)
	reset.Start, reset.End = at, at
	switch {
	case reset.Calendar == "":
		reset.Slot = max(reset.Slot, at.UnixMilli()/reset.Period.Milliseconds())
	case reset.Calendar == j.schedule():
		reset.Slot = max(reset.Slot, j.slotOf(at.UnixMilli()))
	}
	return rec.run, reset, nil
}
