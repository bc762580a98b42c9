package zklock_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// serverNow is ZooKeeper's clock: the modification time of a write.
func serverNow(t testing.TB, obs *zk.Conn, scratch string) time.Time {
	t.Helper()
	stat, err := obs.Set(scratch, nil, -1)
	if errors.Is(err, zk.ErrNoNode) {
		_, err = obs.Create(scratch, nil, 0, zk.WorldACL(zk.PermAll))
		require.NoError(t, err)
		stat, err = obs.Set(scratch, nil, -1)
	}
	require.NoError(t, err)
	return time.UnixMilli(stat.Mtime)
}

// Ten clients start the same job in each of 20 periods of 2 s (in the
// middle of the period, by the server's clock): every period is run exactly
// once, and its record names the run. zklock reads no host clock for a job
// (its slot is the server's mtime of a write, and owner records carry no
// host time), so hosts whose clocks disagree see the same slots.
func TestJobRunsOncePerPeriodAcrossHosts(t *testing.T) {
	t.Parallel()
	const hosts, periods, period = 10, 20, 2 * time.Second
	p := lockPath(t)
	obs := observer(t)
	jobs := make([]*zklock.Job, hosts)
	ids := make(map[string]bool)
	for i := range jobs {
		c := connect(t)
		ids[c.ID()] = true
		j, err := c.NewJob(p, period)
		require.NoError(t, err)
		jobs[i] = j
	}
	require.NoError(t, zklock.EnsureParents(ctxTimeout(t, 5*time.Second), connect(t), p))
	var mu sync.Mutex
	ran := make(map[int64]int) // slot → fn calls
	for range periods {
		now := serverNow(t, obs, p+".clock")
		slot := now.UnixMilli() / period.Milliseconds()
		time.Sleep(time.Until(now.Add(time.Duration((slot+1)*period.Milliseconds()-now.UnixMilli())*time.Millisecond + period/2))) // the next period's middle
		slot++
		var wg sync.WaitGroup
		for _, j := range jobs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				run, err := j.Run(ctxTimeout(t, 10*time.Second), func(ctx context.Context) error {
					time.Sleep(20 * time.Millisecond) // the others check meanwhile
					return nil
				})
				switch {
				case err == nil:
					mu.Lock()
					ran[run.Slot]++
					mu.Unlock()
				case errors.Is(err, zklock.ErrRanThisPeriod), errors.Is(err, zklock.ErrLocked):
				default:
					t.Errorf("Run: %v", err)
				}
			}()
		}
		wg.Wait()
		last, err := jobs[0].LastRun(ctxTimeout(t, 5*time.Second))
		require.NoError(t, err)
		require.Equal(t, slot, last.Slot, "the record is this period's")
		require.Equal(t, "succeeded", last.Outcome)
		require.True(t, ids[last.Owner.Client], "the record names one of the hosts")
		require.False(t, last.End.Before(last.Start))
		require.Equal(t, slot, last.Start.UnixMilli()/period.Milliseconds(), "start is on the server's clock")
	}
	require.Len(t, ran, periods, "every period ran: %v", ran)
	for slot, n := range ran {
		require.Equal(t, 1, n, "slot %d ran %d times", slot, n)
	}
}

// A failed run is not run again in its period by default; RetryFailed runs
// it again, and a success then ends the period.
func TestJobFailedRunAndRetryFailed(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	c := connect(t)
	plain, err := c.NewJob(p, time.Hour)
	require.NoError(t, err)
	retrying, err := c.NewJob(p, time.Hour, zklock.RetryFailed())
	require.NoError(t, err)
	calls := 0
	boom := errors.New("boom")
	run, err := plain.Run(ctxTimeout(t, 10*time.Second), func(context.Context) error { calls++; return boom })
	require.ErrorIs(t, err, boom)
	require.Equal(t, "failed", run.Outcome)
	require.Equal(t, "boom", run.Error)

	again, err := plain.Run(ctxTimeout(t, 10*time.Second), func(context.Context) error { calls++; return nil })
	require.ErrorIs(t, err, zklock.ErrRanThisPeriod)
	require.Equal(t, "failed", again.Outcome, "the period's run is reported")
	require.Equal(t, run.Slot, again.Slot)
	require.Equal(t, 1, calls)

	_, err = retrying.Run(ctxTimeout(t, 10*time.Second), func(context.Context) error { calls++; return nil })
	require.NoError(t, err)
	require.Equal(t, 2, calls, "RetryFailed ran the failed period again")
	_, err = retrying.Run(ctxTimeout(t, 10*time.Second), func(context.Context) error { calls++; return nil })
	require.ErrorIs(t, err, zklock.ErrRanThisPeriod, "a success ends the period, even with RetryFailed")
	require.Equal(t, 2, calls)
}

// A runner that dies mid-run (its session expires while fn runs) records no
// end: its guarded write is refused. The period counts as run (at most once)
// unless RetryFailed, which runs it again.
func TestJobRunnerThatDiesRecordsNoEnd(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	p := lockPath(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	dying := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(timeout))
	j, err := dying.NewJob(p, time.Hour)
	require.NoError(t, err)
	_, err = j.Run(context.Background(), func(ctx context.Context) error {
		proxy.Stall() // the host freezes: its session expires on the server
		<-ctx.Done()
		return ctx.Err()
	})
	require.ErrorIs(t, err, zklock.ErrLockLost)
	proxy.Resume()
	proxy.Cut()
	waitChildren(t, observer(t), p, 0) // the server expired the session: its node is gone

	other := connect(t)
	j2, err := other.NewJob(p, time.Hour)
	require.NoError(t, err)
	run, err := j2.Run(ctxTimeout(t, 20*time.Second), func(context.Context) error { t.Fatal("ran twice in one period"); return nil })
	require.ErrorIs(t, err, zklock.ErrRanThisPeriod)
	require.Equal(t, "running", run.Outcome, "the dead runner's start stands; no end was recorded")
	require.Equal(t, dying.ID(), run.Owner.Client)
	require.True(t, run.End.IsZero())

	j3, err := other.NewJob(p, time.Hour, zklock.RetryFailed())
	require.NoError(t, err)
	run, err = j3.Run(ctxTimeout(t, 20*time.Second), func(context.Context) error { return nil })
	require.NoError(t, err)
	require.Equal(t, "succeeded", run.Outcome)
	require.Equal(t, other.ID(), run.Owner.Client)
}

// While one host runs the job, another's Run returns at once with ErrLocked
// and the running record (who, since when).
func TestJobBusyReturnsAtOnceWithTheRunningRecord(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	a, b := connect(t), connect(t)
	ja, err := a.NewJob(p, time.Hour)
	require.NoError(t, err)
	jb, err := b.NewJob(p, time.Hour)
	require.NoError(t, err)
	running, finish := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := ja.Run(context.Background(), func(context.Context) error { close(running); <-finish; return nil })
		done <- err
	}()
	<-running
	run, err := jb.Run(ctxTimeout(t, 10*time.Second), func(context.Context) error { t.Fatal("ran beside the runner"); return nil })
	require.ErrorIs(t, err, zklock.ErrLocked)
	require.Equal(t, "running", run.Outcome)
	require.Equal(t, a.ID(), run.Owner.Client)
	close(finish)
	require.NoError(t, <-done)
}

func TestNewJobRefusesASubMillisecondPeriod(t *testing.T) {
	t.Parallel()
	c := connect(t)
	_, err := c.NewJob(lockPath(t), time.Microsecond)
	require.ErrorIs(t, err, zklock.ErrInvalidArgument)
	_, err = c.NewJob("relative", time.Hour)
	require.ErrorIs(t, err, zklock.ErrInvalidPath)
}

// A record from a later slot than the server's clock now gives (a leader
// whose clock ran ahead, or stepped back since) counts as this period's run:
// running the earlier slot would run the later one twice.
func TestJobRecordAheadOfTheClockIsNotRunAgain(t *testing.T) {
	t.Parallel()
	const period = time.Hour
	p := lockPath(t)
	obs := observer(t)
	c := connect(t)
	j, err := c.NewJob(p, period)
	require.NoError(t, err)
	require.NoError(t, zklock.EnsureParents(ctxTimeout(t, 5*time.Second), c, p))
	now := serverNow(t, obs, p+".clock")
	slot := now.UnixMilli() / period.Milliseconds()
	rec, err := json.Marshal(map[string]any{"slot": slot + 1, "periodMs": period.Milliseconds(),
		"owner": map[string]any{"client": "ahead"}, "start": now.UnixMilli() + period.Milliseconds(), "outcome": "succeeded"})
	require.NoError(t, err)
	_, err = obs.Create(p+".run", rec, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	run, err := j.Run(ctxTimeout(t, 10*time.Second), func(context.Context) error { t.Error("ran a slot before the recorded one"); return nil })
	require.ErrorIs(t, err, zklock.ErrRanThisPeriod)
	require.Equal(t, slot+1, run.Slot)
}
