package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
// held: a runner that lost its lock records only its own end, and only
// while the record still is its run (see JobRun.End). Runs never overlap: a
// run that outlasts its period holds the lock into the next, whose Run calls
// return ErrLocked while it runs; a Run after it in that period runs fn.
type Job struct {
	m           *Mutex
	record      string
	period      time.Duration // a calendar's nominal length
	cal         *Calendar     // NewCalendarJob's, else nil
	retryFailed bool
}

// JobOption configures a Job.
type JobOption func(*Job)

// RetryFailed makes a Run in a period whose run failed (fn returned an
// error, or its runner died or lost the lock before recording an end) call
// fn again. By default it does not, as cron does not: at most once per
// period. The retry is of the failed run's period, or of a later one the
// server's clock gives, never of an earlier one: on a leader whose clock is
// behind the one that stamped the failed run, the clock's period was run
// (or passed over) already, and the retry runs the failed period, recording
// it under that period.
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

// NewCalendarJob returns the job whose lock is path, run at most once per
// calendar period (a day, a week from Monday or a month, in a time zone,
// beginning at a wall-clock time: see Calendar). The slots are read from
// ZooKeeper's clock as for NewJob, converted into the calendar's zone.
func (c *Client) NewCalendarJob(path string, cal Calendar, opts ...JobOption) (*Job, error) {
	if err := cal.check(); err != nil {
		return nil, err
	}
	j, err := c.NewJob(path, nominal[cal.Unit], opts...)
	if err != nil {
		return nil, err
	}
	j.cal = &cal
	return j, nil
}

// schedule names the job's period as its records keep it: a calendar
// ("day at 02:00 Europe/Berlin"), or "" for a duration.
func (j *Job) schedule() string {
	if j.cal == nil {
		return ""
	}
	return j.cal.String()
}

// slotOf is the period holding the server's time now (milliseconds).
func (j *Job) slotOf(now int64) int64 {
	if j.cal != nil {
		return j.cal.slot(now)
	}
	return now / j.period.Milliseconds()
}

// slotStart is when slot began, in milliseconds.
func (j *Job) slotStart(slot int64) int64 {
	if j.cal != nil {
		return j.cal.start(slot)
	}
	return slot * j.period.Milliseconds()
}

// Path returns the job's lock path.
func (j *Job) Path() string { return j.m.path }

// Run is one run of a Job, as its record holds it. Times are ZooKeeper's.
type Run struct {
	Slot   int64         // the period: the server's time in milliseconds / the period's
	Period time.Duration // the job's period when it ran (a calendar's: its nominal length, 24h for a day, 168h a week, 744h a month)
	// Calendar is the calendar period it ran under ("day at 02:00
	// Europe/Berlin"), or "" for a duration.
	Calendar string
	Owner    Owner     // who ran it (for "reset": who reset the record)
	Start    time.Time // when the runner's check found the period not run yet (for "reset": when it was reset)
	End      time.Time // when the end was recorded; zero while it runs (or if its runner died)
	Outcome  string    // "running", "succeeded", "failed", or "reset" (Job.Reset cleared the period's run)
	Cause    string    // why a failed run ended: CauseError, CauseSignal, CauseHoldLimit or CauseLost
	Error    string    // fn's error (or the end's), for "failed"
}

// The causes of a failed run's end, in Run.Cause.
const (
	CauseError     = "error"      // fn returned an error (zklock exec: the command exited non-zero)
	CauseSignal    = "signal"     // the runner was told to stop by a signal and passed it on (zklock exec)
	CauseHoldLimit = "hold-limit" // the run reached the hold limit (WithMaxHold): recorded just before it
	CauseLost      = "lost"       // the runner lost the job's lock while the run went on
)

// Run calls fn if no run was made in the current period, holding the job's
// lock, and returns the run and fn's error (matching ErrLockLost or
// ErrHoldLimit, and wrapping fn's, if the lease ended while fn ran: fn's
// context is cancelled then, as under Mutex.Do, and the end is recorded as
// JobRun.End says). Without calling fn, it returns what Start returns. Its
// time bound is Start's, then fn's, then Finish's.
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
// an error matching ErrLocked and the run recorded: the holder's run if it
// has recorded its start, else the last one (Start waits up to a second for
// a holder that has just taken the lock to record its start). Its time bound
// is TryAcquire's, then at most three requests' (each within ctx and the
// session timeout), then a Release's when it does not start the run.
func (j *Job) Start(ctx context.Context) (*JobRun, Run, error) {
	l, err := j.m.TryAcquire(ctx)
	if errors.Is(err, ErrLocked) {
		last, rerr := j.holdersRun(ctx)
		return nil, last, errors.Join(err, rerr)
	}
	if err != nil {
		return nil, Run{}, err
	}
	r := &JobRun{job: j, lease: l}
	if r.run, err = j.begin(ctx, r); err != nil {
		r.release(ctx)
		return nil, r.run, err
	}
	r.armHoldLimit()
	return r, r.run, nil
}

// holdersWait bounds how long a Start that found the lock held waits for
// the holder to record its start.
const holdersWait = time.Second

// holdersRun is the run a holder of the job's lock is making, if it has
// recorded its start; else, once the record changed (a holder that finds
// the period run writes the record back) or after holdersWait, the last
// run recorded. A record that says "running" is the holder's.
func (j *Job) holdersRun(ctx context.Context) (Run, error) {
	last, changed, err := j.readW(ctx)
	if err != nil || last.Outcome == "running" || changed == nil {
		return last, err
	}
	t := time.NewTimer(holdersWait)
	defer t.Stop()
	select {
	case <-changed:
	case <-t.C:
		return last, nil
	case <-ctx.Done():
		return last, nil
	}
	return j.LastRun(ctx)
}

// begin reads the record and the server's time (a write of the record's own
// data, checked against the version read) under the lease, and records the
// start if the period has not been run; else it returns the period's run and
// ErrRanThisPeriod.
func (j *Job) begin(ctx context.Context, r *JobRun) (Run, error) {
	var rec readRecord
	var now int64
	for attempt := 0; ; attempt++ {
		var err error
		if rec, err = j.read(ctx); err != nil {
			return rec.run, err
		}
		now, err = j.touch(ctx, r.lease, rec)
		// A runner that lost the lock may have recorded its end meanwhile
		// (JobRun.End): read the record again.
		if errors.Is(err, zk.ErrBadVersion) && attempt < 2 {
			continue
		}
		if err != nil {
			return rec.run, err
		}
		break
	}
	last := rec.run
	if last.Outcome != "running" && last.Outcome != "" && last.End.IsZero() {
		last.End = time.UnixMilli(now) // an old record's end, as touch pinned it
	}
	slot := j.slotOf(now)
	if j.covers(last, slot) && !(j.retryFailed && last.Outcome != "succeeded") {
		return last, ErrRanThisPeriod
	}
	// A retry of a failed run, or a start after a reset, runs the period of
	// the record it replaces, or a later one the clock gives: never an
	// earlier one, which a leader whose clock is behind the record's would
	// give (that period was run, or skipped, already), and the record never
	// moves back to it (issue 54).
	if s, ok := j.recordSlot(last); ok && s > slot {
		slot = s
	}
	r.success = rec.success
	run := Run{Slot: slot, Period: j.period, Calendar: j.schedule(), Owner: r.lease.onNode().q.owner, Start: time.UnixMilli(now), Outcome: "running"}
	_, err := r.write(ctx, run)
	return run, err
}

// A JobRun is a run of a Job under way: Start made it, Finish (or End)
// ends it. Its methods are safe for concurrent use.
type JobRun struct {
	job     *Job
	lease   *Lease
	run     Run
	success *jobSuccess // the last success before this run, carried in the record

	mu      sync.Mutex
	version int32       // the record's version after this run's last write
	ended   bool        // End has begun: no hold-limit record after it
	limit   *time.Timer // the hold-limit record's timer, nil without a limit
	limited chan struct{}
	limitOK bool // the hold-limit end was recorded
}

// LastRun returns the last run recorded, the zero Run if none: for
// operators and 'zklock status'. Its time bound is the session timeout.
func (j *Job) LastRun(ctx context.Context) (Run, error) {
	rec, err := j.read(ctx)
	return rec.run, err
}

// JobState is what a job's record says: its last run, and its last
// succeeded run (the zero Run if none is remembered), with who ran it. A
// record written before LastSuccess existed remembers a success only if it
// is one; one written before it kept its runner has a zero Owner there.
type JobState struct {
	Last        Run
	LastSuccess Run
}

// State returns the job's record: for monitoring ("has the job succeeded
// in the last two periods?") and 'zklock job'. Its time bound is the
// session timeout.
func (j *Job) State(ctx context.Context) (JobState, error) {
	rec, err := j.read(ctx)
	if err != nil {
		return JobState{}, err
	}
	st := JobState{Last: rec.run}
	if s := rec.success; s != nil {
		st.LastSuccess = Run{Slot: s.Slot, Period: rec.run.Period, Calendar: rec.run.Calendar, Owner: s.Owner,
			Start: time.UnixMilli(s.Start), End: time.UnixMilli(s.End), Outcome: "succeeded"}
		if rec.run.Outcome == "succeeded" {
			st.LastSuccess = rec.run
		}
	}
	return st, nil
}

// recordSlot is the period, in the job's slots, that a record is of (false
// for no record): its slot under the job's own period or calendar, else the
// slot of its start. A reset record is of the later of the period of the
// record it replaced and the one the clock gave at the reset.
func (j *Job) recordSlot(last Run) (int64, bool) {
	switch {
	case last.Outcome == "":
		return 0, false
	case last.Period == j.period && last.Calendar == j.schedule():
		s := last.Slot
		if last.Outcome == "reset" && !last.End.IsZero() {
			s = max(s, j.slotOf(last.End.UnixMilli()))
		}
		return s, true
	}
	return j.slotOf(last.Start.UnixMilli()), true
}

// covers reports a recorded run made in slot or later: a record from a
// later slot than the server's clock now gives (a leader whose clock ran
// ahead, or stepped back since) must not let the earlier slot run, which
// would run the later one twice. A run recorded under another period or
// calendar is compared by its start. A reset record covers nothing.
func (j *Job) covers(last Run, slot int64) bool {
	switch {
	case last.Outcome == "", last.Outcome == "reset":
		return false
	case last.Period == j.period && last.Calendar == j.schedule():
		return last.Slot >= slot
	}
	return last.Start.UnixMilli() >= j.slotStart(slot)
}
