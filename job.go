package zklock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
)

// ErrRanThisPeriod is what Job.Run returns, with the run that was made,
// when this period's run was made already (by any process, this one
// included): fn is not called.
var ErrRanThisPeriod = errors.New("zklock: already run this period")

// A Job is a task that many processes start (the same crontab line on every
// host) and that must run once per period: of all the Run calls in one
// period, one calls fn; the others return at once, saying who ran it and
// when. A period is a slot of ZooKeeper's clock, not the hosts': slot n is
// [n·period, (n+1)·period) of the server's time in milliseconds since 1970,
// read from the modification time of a write, so a host whose clock is
// minutes off neither runs the job twice nor skips it.
//
// The record of the last run lives in the node path + ".run" (a sibling of
// the lock path), written by guarded writes (Lease.Multi) while the lock is
// held: a runner that lost its lock records nothing. Runs never overlap: a run
// that outlasts its period holds the lock into the next, whose Run calls
// return ErrLocked while it runs; a Run after it in that period runs fn.
type Job struct {
	m           *Mutex
	record      string
	period      time.Duration
	retryFailed bool
}

// JobOption configures a Job.
type JobOption func(*Job)

// RetryFailed makes a Run in a period whose run failed (fn returned an
// error, or its runner died or lost the lock before recording an end) call
// fn again. By default it does not, as cron does not: at most once per
// period.
func RetryFailed() JobOption { return func(j *Job) { j.retryFailed = true } }

// NewJob returns the job whose lock is path, run at most once per period
// (at least a millisecond).
func (c *Client) NewJob(path string, period time.Duration, opts ...JobOption) (*Job, error) {
	m, err := c.NewMutex(path)
	if err != nil {
		return nil, err
	}
	if period < time.Millisecond {
		return nil, fmt.Errorf("%w: job period %v is under a millisecond", ErrInvalidArgument, period)
	}
	j := &Job{m: m, record: path + ".run", period: period}
	for _, o := range opts {
		o(j)
	}
	return j, nil
}

// Path returns the job's lock path.
func (j *Job) Path() string { return j.m.path }

// Run is one run of a Job, as its record holds it. Times are ZooKeeper's.
type Run struct {
	Slot    int64         // the period: the server's time in milliseconds / the period's
	Period  time.Duration // the job's period when it ran
	Owner   Owner         // who ran it
	Start   time.Time     // when the runner's check found the period not run yet
	End     time.Time     // when the end was recorded; zero while it runs (or if its runner died)
	Outcome string        // "running", "succeeded" or "failed"
	Error   string        // fn's error, for "failed"
}

// Run calls fn if no run was made in the current period, holding the job's
// lock, and returns the run and fn's error (matching ErrLockLost or
// ErrHoldLimit, and wrapping fn's, if the lease ended while fn ran: fn's
// context is cancelled then, as under Mutex.Do, and no end is recorded).
// Without calling fn, it returns what Start returns. Its time bound is
// Start's, then fn's, then Finish's.
func (j *Job) Run(ctx context.Context, fn func(ctx context.Context) error) (Run, error) {
	r, run, err := j.Start(ctx)
	if err != nil {
		return run, err
	}
	fctx, cancel := context.WithCancelCause(context.WithValue(ctx, leaseKey{}, r.lease))
	r.lease.whenEnded(cancel)
	ferr := fn(fctx)
	cancel(context.Canceled)
	return r.Finish(ctx, ferr)
}

// Start begins the current period's run, for a caller that runs the job
// itself (as 'zklock exec --once-per' does): it takes the job's lock without
// waiting (TryAcquire), reads the server's time, and, if the period has not
// been run, records the start and returns the run under way. Otherwise it
// returns the run that covers the period and ErrRanThisPeriod, or, while
// another process holds the lock (running the job, or checking the period),
// the last run recorded and an error matching ErrLocked. Its time bound is
// TryAcquire's, then at most three requests' (each within ctx and the
// session timeout), then a Release's when it does not start the run.
func (j *Job) Start(ctx context.Context) (*JobRun, Run, error) {
	l, err := j.m.TryAcquire(ctx)
	if errors.Is(err, ErrLocked) {
		last, rerr := j.LastRun(ctx)
		return nil, last, errors.Join(err, rerr)
	}
	if err != nil {
		return nil, Run{}, err
	}
	r := &JobRun{job: j, lease: l}
	if r.run, err = j.begin(ctx, l); err != nil {
		r.release(ctx)
		return nil, r.run, err
	}
	return r, r.run, nil
}

// begin reads the record and the server's time (a write of the record's own
// data, checked against the version read) under the lease, and records the
// start if the period has not been run; else it returns the period's run and
// ErrRanThisPeriod.
func (j *Job) begin(ctx context.Context, l *Lease) (Run, error) {
	last, raw, stat, err := j.read(ctx)
	if err != nil {
		return last, err
	}
	now, err := j.touch(ctx, l, raw, stat)
	if err != nil {
		return last, err
	}
	slot := now / j.period.Milliseconds()
	if j.covers(last, slot) && !(j.retryFailed && last.Outcome != "succeeded") {
		return last, ErrRanThisPeriod
	}
	run := Run{Slot: slot, Period: j.period, Owner: l.q.owner, Start: time.UnixMilli(now), Outcome: "running"}
	_, err = j.write(ctx, l, run)
	return run, err
}

// A JobRun is a run of a Job under way: Start made it, Finish ends it.
type JobRun struct {
	job   *Job
	lease *Lease
	run   Run
}

// Lease returns the lease the run holds the job's lock by: watch Done, pass
// its Token to what the job writes.
func (r *JobRun) Lease() *Lease { return r.lease }

// Finish records the run's end (succeeded if ferr is nil, else failed with
// ferr's message) with a guarded write, releases the lock, and returns the
// run and ferr. If the lease has ended (lost, or the hold limit), nothing is
// recorded: the error matches the lease's end and wraps ferr. Its time bound
// is one request's (within ctx and the session timeout), then a Release of
// at most the cleanup timeout.
func (r *JobRun) Finish(ctx context.Context, ferr error) (Run, error) {
	defer r.release(ctx)
	run := r.run
	run.Outcome = "succeeded"
	if ferr != nil {
		run.Outcome, run.Error = "failed", ferr.Error()
	}
	if lost := r.lease.Err(); lost != nil {
		return run, joinFnErr(lost, ferr)
	}
	end, err := r.job.write(ctx, r.lease, run)
	if err != nil {
		return run, joinFnErr(err, ferr)
	}
	run.End = end
	return run, ferr
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

// jobRecord is a run as stored: times in the server's milliseconds.
type jobRecord struct {
	Slot    int64  `json:"slot"`
	Period  int64  `json:"periodMs"`
	Owner   Owner  `json:"owner"`
	Start   int64  `json:"start"`
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
}

// read returns the last run recorded (the zero Run if none), the record's
// data and its stat (nil when the node does not exist), within ctx and the
// session timeout.
func (j *Job) read(ctx context.Context) (Run, []byte, *zk.Stat, error) {
	c := j.m.c
	ctx, scope, err := c.begin(ctx, true)
	if err != nil {
		return Run{}, nil, nil, err
	}
	defer scope.end()
	type got struct {
		data []byte
		stat *zk.Stat
	}
	r, err := call(ctx, c, func() (got, error) {
		data, stat, err := c.conn.Get(j.record)
		return got{data, stat}, err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return Run{}, nil, nil, nil
	case err != nil:
		return Run{}, nil, nil, fmt.Errorf("zklock: reading %s: %w", j.record, err)
	}
	return decodeRun(r.data, r.stat), r.data, r.stat, nil
}

// decodeRun turns a record into a Run; the zero Run for data that is not one.
func decodeRun(data []byte, stat *zk.Stat) Run {
	var rec jobRecord
	if json.Unmarshal(data, &rec) != nil || rec.Outcome == "" {
		return Run{}
	}
	run := Run{Slot: rec.Slot, Period: time.Duration(rec.Period) * time.Millisecond, Owner: rec.Owner, Start: time.UnixMilli(rec.Start), Outcome: rec.Outcome, Error: rec.Error}
	if rec.Outcome != "running" {
		run.End = time.UnixMilli(stat.Mtime)
	}
	return run
}

// touch writes the record's own data back (or creates it empty) under the
// lease and returns the write's time on the server's clock. The version
// check refuses a record someone changed since it was read.
func (j *Job) touch(ctx context.Context, l *Lease, raw []byte, stat *zk.Stat) (int64, error) {
	var ops []any
	if stat == nil {
		ops = []any{&zk.CreateRequest{Path: j.record, Acl: j.m.c.opts.acl}, &zk.SetDataRequest{Path: j.record, Version: -1}}
	} else {
		ops = []any{&zk.SetDataRequest{Path: j.record, Data: raw, Version: stat.Version}}
	}
	res, err := l.Multi(ctx, ops...)
	if err != nil {
		return 0, err
	}
	return res[len(res)-1].Stat.Mtime, nil
}

// write records run under the lease and returns the write's server time.
func (j *Job) write(ctx context.Context, l *Lease, run Run) (time.Time, error) {
	res, err := l.Multi(ctx, &zk.SetDataRequest{Path: j.record, Data: encodeRun(run, j.period), Version: -1})
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMilli(res[0].Stat.Mtime), nil
}

func encodeRun(run Run, period time.Duration) []byte {
	rec := jobRecord{Slot: run.Slot, Period: period.Milliseconds(), Owner: run.Owner, Start: run.Start.UnixMilli(), Outcome: run.Outcome, Error: run.Error}
	if run.Outcome == "" {
		return nil
	}
	b, _ := json.Marshal(rec)
	return b
}

// LastRun returns the last run recorded, the zero Run if none: for
// operators and 'zklock status'. Its time bound is the session timeout.
func (j *Job) LastRun(ctx context.Context) (Run, error) {
	run, _, _, err := j.read(ctx)
	return run, err
}

// covers reports a recorded run made in slot or later: a record from a
// later slot than the server's clock now gives (a leader whose clock ran
// ahead, or stepped back since) must not let the earlier slot run, which
// would run the later one twice. A run recorded under another period is
// compared by its start.
func (j *Job) covers(last Run, slot int64) bool {
	switch {
	case last.Outcome == "":
		return false
	case last.Period == j.period:
		return last.Slot >= slot
	}
	return last.Start.UnixMilli() >= slot*j.period.Milliseconds()
}
