//go:build linux

package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zklock/zklock"
)

// The torture's scheduled job (issues 29 and 42): any worker may start the
// job of a mutex path, once per tortureJobPeriod of the server's clock; some
// start it with RetryFailed, some runs fail, and now and then a worker
// resets the record instead. The job's lock is a mutex (on <path>-job), so its
// runs enter the ledger as exclusive holders. jobTally.check fails the run when
// a slot of a path was started more often than its failures and resets
// allow, or succeeded twice without a reset of its success in between; and
// a start or a reset fails it at once when it records an earlier slot than
// one recorded before it began (a record moved back: issue 54). With the
// swarm's "skew" on, the servers' clocks disagree and leader changes move
// the slots back and forth.

// tortureJobPeriod is short, so that a minute holds many periods and several
// workers start the job in each.
const tortureJobPeriod = 300 * time.Millisecond

// jobRecordSuffix names a job's record: persistent by design (the next
// period reads it), so checkTree leaves it, and the paths above it, alone.
const jobRecordSuffix = ".run"

// keptForJob reports p as a job record or an ancestor of one.
func keptForJob(p string, records []string) bool {
	for _, r := range records {
		if r == p || strings.HasPrefix(r, p+"/") {
			return true
		}
	}
	return false
}

// jobSlot is what the workers saw of one slot of one path's job.
type jobSlot struct {
	starts, startsPlain   int      // runs started; by workers without RetryFailed
	successes, failures   int      // ends recorded as succeeded; runs that did not end so
	resets, successResets int      // resets that replaced this slot's record; its success
	who                   []string // who started it, in the order seen
}

// jobTally counts the runs started, ended and reset per path and slot.
type jobTally struct {
	mu           sync.Mutex
	slots        map[string]*jobSlot // path#slot
	floor        map[string]int64    // per path, the latest slot a start or a reset recorded that has returned
	vague        []vagueReset        // resets whose outcome is unknown (an error, perhaps after the write)
	resetsLanded int
}

// vagueReset is a reset of path that may have landed in slots lo..hi (the
// torture's ZooKeeper runs on the test's host: its clock is the host's, or,
// with the swarm's "skew" on, up to tortureSkew off it).
type vagueReset struct {
	path   string
	lo, hi int64
}

// vagueResets counts the resets of path whose outcome is unknown and that
// may have replaced the record of slot.
func (j *jobTally) vagueResets(path string, slot int64) int {
	n := 0
	for _, v := range j.vague {
		if v.path == path && v.lo <= slot && slot <= v.hi {
			n++
		}
	}
	return n
}

// floorOf is the latest slot recorded for path by a start or a reset that
// has returned (-1 for none): a record never moves back (issue 54), so a
// start or a reset called after it records that slot or a later one.
func (j *jobTally) floorOf(path string) int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	if f, ok := j.floor[path]; ok {
		return f
	}
	return -1
}

// recorded notes a slot recorded for path by a start or a reset that has
// returned.
func (j *jobTally) recorded(path string, slot int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.floor == nil {
		j.floor = map[string]int64{}
	}
	if f, ok := j.floor[path]; !ok || slot > f {
		j.floor[path] = slot
	}
}

// skewSlots is how many slots ZooKeeper's time may be apart from the
// host's (the torture's servers run on its host), rounded up: with the
// swarm's "skew" on, a server's clock reads up to tortureSkew off.
func skewSlots(sw swarmConfig) int64 {
	if !sw.skew {
		return 0
	}
	return int64((tortureSkew + tortureJobPeriod - 1) / tortureJobPeriod)
}

// slotNow is the job's slot by the host's clock.
func slotNow() int64 { return time.Now().UnixMilli() / tortureJobPeriod.Milliseconds() }

func (j *jobTally) slot(path string, slot int64) *jobSlot {
	if j.slots == nil {
		j.slots = map[string]*jobSlot{}
	}
	key := fmt.Sprintf("%s#%d", path, slot)
	s := j.slots[key]
	if s == nil {
		s = &jobSlot{}
		j.slots[key] = s
	}
	return s
}

func (j *jobTally) started(path string, slot int64, who string, retry bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := j.slot(path, slot)
	s.starts++
	if !retry {
		s.startsPlain++
	}
	s.who = append(s.who, who)
}

func (j *jobTally) ended(path string, slot int64, succeeded bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := j.slot(path, slot)
	if succeeded {
		s.successes++
	} else {
		s.failures++
	}
}

// reset counts a reset that replaced the record of replaced, or, with
// landed false, one whose outcome is unknown, made from slot from (by the
// host's clock) until now.
func (j *jobTally) reset(path string, replaced zklock.Run, landed bool, from, skew int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !landed { // it replaced a record of the slots before it, or of one during it
		j.vague = append(j.vague, vagueReset{path, from - 2 - skew, slotNow() + 2 + skew})
		return
	}
	j.resetsLanded++
	switch replaced.Outcome {
	case "running", "succeeded", "failed":
		s := j.slot(path, replaced.Slot)
		s.resets++
		if replaced.Outcome == "succeeded" {
			s.successResets++
		}
	}
}

// check reports every slot started more often than allowed: once, plus
// once per failed run (for a worker with RetryFailed) and per reset; and
// every slot that succeeded twice without a reset of its success.
func (j *jobTally) check(tt *torture) {
	j.mu.Lock()
	defer j.mu.Unlock()
	keys := make([]string, 0, len(j.slots))
	for k := range j.slots {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		s := j.slots[key]
		path, n, _ := strings.Cut(key, "#")
		slot, _ := strconv.ParseInt(n, 10, 64)
		vague := j.vagueResets(path, slot)
		resets := s.resets + vague
		switch {
		case s.starts > 1+resets+s.failures:
			tt.lg.violate("job %s: started %d times (by %v) with %d failed runs and %d resets", key, s.starts, s.who, s.failures, resets)
		case s.startsPlain > 1+resets:
			tt.lg.violate("job %s: started %d times without RetryFailed (by %v) with %d resets", key, s.startsPlain, s.who, resets)
		case s.successes > 1+s.successResets+vague:
			tt.lg.violate("job %s: succeeded %d times (by %v) with %d resets of a success", key, s.successes, s.who, s.successResets)
		}
	}
}

// job starts the path's job (a tenth of the time, resets its record
// instead), on the path <path>-job: when this call runs it, the lease is held like a plain one and
// the end recorded (Finish), a failure a third of the time; otherwise the
// period was run or is being run.
func (o *op) job(ctx context.Context) {
	// The job has a lock path of its own: on a path the other workers queue
	// on, nearly every start finds the lock taken (ErrLocked), and the
	// period's check is hardly ever reached.
	o.path += "-job"
	retry := o.rng.IntN(3) == 0
	var opts []zklock.JobOption
	if retry {
		opts = append(opts, zklock.RetryFailed())
	}
	j, err := o.c.NewJob(o.lp(o.path), tortureJobPeriod, opts...)
	if err != nil {
		o.tt.lg.violate("NewJob(%s): %v", o.path, err)
		return
	}
	// A burst of starts, as hosts whose crontabs fire together make: most
	// land in one slot, so the period's check is what stops the repeats.
	for n := 1 + o.rng.IntN(4); n > 0 && ctx.Err() == nil; n-- {
		o.jobOnce(ctx, j, retry)
		sleepCtx(ctx, randDur(o.rng, 0, 20*time.Millisecond))
	}
}

// jobOnce starts the job once, or resets its record.
func (o *op) jobOnce(ctx context.Context, j *zklock.Job, retry bool) {
	actx, cancel, dl := o.deadline(ctx)
	defer cancel()
	if o.rng.IntN(10) == 0 {
		o.jobReset(actx, j)
		return
	}
	floor := o.tt.jobs.floorOf(o.path)
	o.s.waiting.Add(1)
	r, run, err := j.Start(actx)
	at := monoNow()
	o.s.waiting.Add(-1)
	o.tt.returned(o.who+" job", dl, at, err)
	switch {
	case errors.Is(err, zklock.ErrRanThisPeriod):
		o.tt.counts.add("job.ran_already")
		return
	case errors.Is(err, zklock.ErrLocked):
		o.tt.counts.add("job.busy")
		return
	case err != nil:
		o.tt.acquireError("job", err)
		return
	}
	if run.Slot < floor {
		o.tt.lg.violate("job %s: %s started slot %d (retry: %v), earlier than slot %d, recorded before it began: the record moved back", o.path, o.who, run.Slot, retry, floor)
	}
	o.tt.jobs.recorded(o.path, run.Slot)
	o.tt.jobs.started(o.path, run.Slot, o.who, retry)
	if retry {
		o.tt.counts.add("job.retry_started")
	}
	l := r.Lease()
	hold := o.holdTime()
	rec := o.granted("job", l, at, hold, "")
	o.hold(ctx, l.Done(), hold)
	o.tt.lg.ended(rec, monoNow(), zklock.ErrReleased)
	var ferr error
	if o.rng.IntN(3) == 0 {
		ferr = errors.New("torture: the job failed")
		o.tt.counts.add("job.failed")
	}
	fctx, fcancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer fcancel()
	ended, err := r.Finish(fctx, ferr)
	o.tt.jobs.ended(o.path, run.Slot, err == nil && ended.Outcome == "succeeded")
	if err != nil && !errors.Is(err, ferr) && !errors.Is(err, zklock.ErrLockLost) && !errors.Is(err, zklock.ErrHoldLimit) && !errors.Is(err, zklock.ErrClosed) {
		o.tt.counts.add("job.finish_error")
	}
	if errors.Is(err, zklock.ErrHoldLimit) {
		o.tt.counts.add("job.ended_hold_limit")
	}
}

// jobReset resets the path's job record, as 'zklock job --reset' does.
func (o *op) jobReset(ctx context.Context, j *zklock.Job) {
	from := slotNow()
	floor := o.tt.jobs.floorOf(o.path)
	replaced, reset, err := j.Reset(ctx)
	switch {
	case err == nil:
		o.tt.counts.add("job.reset")
		if reset.Slot < floor {
			o.tt.lg.violate("job %s: %s reset it into slot %d, earlier than slot %d, recorded before it began: the record moved back", o.path, o.who, reset.Slot, floor)
		}
		o.tt.jobs.recorded(o.path, reset.Slot)
		o.tt.jobs.reset(o.path, replaced, true, from, skewSlots(o.tt.cfg.sw))
	case errors.Is(err, zklock.ErrLocked):
		o.tt.counts.add("job.reset_busy")
	default: // it may have landed
		o.tt.counts.add("job.reset_error")
		o.tt.jobs.reset(o.path, zklock.Run{}, false, from, skewSlots(o.tt.cfg.sw))
	}
}
