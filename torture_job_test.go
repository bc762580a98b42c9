package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/zklock/zklock"
)

// The torture's scheduled job (issue 29): any worker may start the job of a
// mutex path, once per tortureJobPeriod of the server's clock. The job's lock
// is the path's mutex, so its runs enter the ledger as exclusive holders;
// jobTally fails the run when one slot of one path is started twice.

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

// jobTally counts the runs started per path and slot.
type jobTally struct {
	mu   sync.Mutex
	runs map[string]string // path#slot → who started it
}

func (j *jobTally) started(tt *torture, path string, slot int64, who string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.runs == nil {
		j.runs = map[string]string{}
	}
	key := fmt.Sprintf("%s#%d", path, slot)
	if first, ok := j.runs[key]; ok {
		tt.lg.violate("job %s: slot %d started twice, by %s and by %s", path, slot, first, who)
		return
	}
	j.runs[key] = who
}

// job starts the path's job: when this call runs it, the lease is held like
// a plain one and the end recorded (Finish); otherwise the period was run or
// is being run.
func (o *op) job(ctx context.Context) {
	j, err := o.c.NewJob(o.lp(o.path), tortureJobPeriod)
	if err != nil {
		o.tt.lg.violate("NewJob(%s): %v", o.path, err)
		return
	}
	actx, cancel, dl := o.deadline(ctx)
	defer cancel()
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
	o.tt.jobs.started(o.tt, o.path, run.Slot, o.who)
	l := r.Lease()
	hold := o.holdTime()
	rec := o.granted("job", l, at, hold, "")
	o.hold(ctx, l.Done(), hold)
	o.tt.lg.ended(rec, monoNow(), zklock.ErrReleased)
	fctx, fcancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer fcancel()
	if _, err := r.Finish(fctx, nil); err != nil && !errors.Is(err, zklock.ErrLockLost) && !errors.Is(err, zklock.ErrHoldLimit) && !errors.Is(err, zklock.ErrClosed) {
		o.tt.counts.add("job.finish_error")
	}
}
