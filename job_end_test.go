package zklock_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
)

// A run stopped by the hold limit records its end with that cause, written
// while it still holds the lock (a moment before the limit): the next start
// in the period sees "failed (hold-limit)", not "no end recorded".
func TestJobHoldLimitEndIsRecorded(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	c := connect(t, zklock.WithMaxHold(600*time.Millisecond))
	j, err := c.NewJob(p, time.Hour)
	require.NoError(t, err)
	run, err := j.Run(ctxTimeout(t, 10*time.Second), func(ctx context.Context) error {
		<-ctx.Done()
		return context.Cause(ctx)
	})
	require.ErrorIs(t, err, zklock.ErrHoldLimit)
	require.Equal(t, "failed", run.Outcome)
	require.Equal(t, zklock.CauseHoldLimit, run.Cause)

	last, err := j.LastRun(ctxTimeout(t, 5*time.Second))
	require.NoError(t, err)
	require.Equal(t, "failed", last.Outcome)
	require.Equal(t, zklock.CauseHoldLimit, last.Cause)
	require.Contains(t, last.Error, "hold limit")
	require.False(t, last.End.IsZero())
	held := last.End.Sub(last.Start)
	require.Less(t, held, 600*time.Millisecond, "recorded before the limit, on the server's clock")
	require.Greater(t, held, 400*time.Millisecond)
}

// A run that ends in time with a hold limit records its own end over
// nothing: the limit's record is never written.
func TestJobHoldLimitNotReachedRecordsTheTrueEnd(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	c := connect(t, zklock.WithMaxHold(time.Minute))
	j, err := c.NewJob(p, time.Hour)
	require.NoError(t, err)
	run, err := j.Run(ctxTimeout(t, 10*time.Second), func(context.Context) error { return nil })
	require.NoError(t, err)
	require.Equal(t, "succeeded", run.Outcome)
	require.Empty(t, run.Cause)
}

// A runner whose lock node is deleted mid-run (an operator's 'zklock
// break') records its end as lost: nobody started the job since, so the
// record is still its start, and the write checked against that version
// lands.
func TestJobLostRunRecordsItsEndWhileTheRecordIsItsOwn(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	c := connect(t)
	j, err := c.NewJob(p, time.Hour)
	require.NoError(t, err)
	run, err := j.Run(ctxTimeout(t, 10*time.Second), func(ctx context.Context) error {
		nodes := waitChildren(t, obs, p, 1)
		require.NoError(t, obs.Delete(p+"/"+nodes[0], -1))
		<-ctx.Done()
		return errors.New("interrupted")
	})
	require.ErrorIs(t, err, zklock.ErrLockLost)
	require.Equal(t, zklock.CauseLost, run.Cause)
	last, err := j.LastRun(ctxTimeout(t, 5*time.Second))
	require.NoError(t, err)
	require.Equal(t, "failed", last.Outcome)
	require.Equal(t, zklock.CauseLost, last.Cause)
	require.Equal(t, "interrupted", last.Error)
	require.Equal(t, c.ID(), last.Owner.Client)
}

// A lost runner whose record someone else wrote since (another start
// checked the period) leaves that record alone.
func TestJobLostRunLeavesANewerRecord(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	a, b := connect(t), connect(t)
	ja, err := a.NewJob(p, time.Hour)
	require.NoError(t, err)
	jb, err := b.NewJob(p, time.Hour, zklock.RetryFailed())
	require.NoError(t, err)
	_, err = ja.Run(ctxTimeout(t, 20*time.Second), func(ctx context.Context) error {
		nodes := waitChildren(t, obs, p, 1)
		require.NoError(t, obs.Delete(p+"/"+nodes[0], -1))
		<-ctx.Done() // lost: b may start now
		run, err := jb.Run(ctxTimeout(t, 10*time.Second), func(context.Context) error { return nil })
		require.NoError(t, err, "the lost run counts as failed: RetryFailed runs it")
		require.Equal(t, b.ID(), run.Owner.Client)
		return errors.New("interrupted")
	})
	require.ErrorIs(t, err, zklock.ErrLockLost)
	last, err := ja.LastRun(ctxTimeout(t, 5*time.Second))
	require.NoError(t, err)
	require.Equal(t, "succeeded", last.Outcome, "b's run stands")
	require.Equal(t, b.ID(), last.Owner.Client)
}

// A record's end reads the same to everyone, before and after later starts
// write the record back to read the server's clock (they used to move the
// end, the node's mtime, by their write).
func TestJobEndTimeStaysPut(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	c := connect(t)
	j, err := c.NewJob(p, time.Hour)
	require.NoError(t, err)
	run, err := j.Run(ctxTimeout(t, 10*time.Second), func(context.Context) error { return nil })
	require.NoError(t, err)
	time.Sleep(20 * time.Millisecond) // the next writes come at another millisecond
	for range 2 {
		again, err := j.Run(ctxTimeout(t, 10*time.Second), func(context.Context) error { return nil })
		require.ErrorIs(t, err, zklock.ErrRanThisPeriod)
		require.Equal(t, run.End, again.End)
		last, err := j.LastRun(ctxTimeout(t, 5*time.Second))
		require.NoError(t, err)
		require.Equal(t, run.End, last.End)
	}
	st, err := j.State(ctxTimeout(t, 5*time.Second))
	require.NoError(t, err)
	require.Equal(t, run.End, st.LastSuccess.End)
}

// Reset: refused while a run holds the job's lock; afterwards it records
// who reset the record and when, keeps the last success, and the next
// start runs the job in the same period.
func TestJobReset(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	c := connect(t)
	j, err := c.NewJob(p, time.Hour)
	require.NoError(t, err)
	first, err := j.Run(ctxTimeout(t, 10*time.Second), func(ctx context.Context) error {
		_, _, err := j.Reset(ctx)
		require.ErrorIs(t, err, zklock.ErrLocked, "a run under way is never reset")
		return nil
	})
	require.NoError(t, err)
	_, err = j.Run(ctxTimeout(t, 10*time.Second), func(context.Context) error { return nil })
	require.ErrorIs(t, err, zklock.ErrRanThisPeriod)

	replaced, reset, err := j.Reset(zklock.ContextWithOwner(ctxTimeout(t, 10*time.Second), "ops"))
	require.NoError(t, err)
	require.Equal(t, first.Start, replaced.Start)
	require.Equal(t, "reset", reset.Outcome)
	require.Equal(t, "ops", reset.Owner.Name)
	require.False(t, reset.End.Before(first.End))
	last, err := j.LastRun(ctxTimeout(t, 5*time.Second))
	require.NoError(t, err)
	require.Equal(t, "reset", last.Outcome)
	require.Equal(t, "ops", last.Owner.Name)
	require.Equal(t, reset.End, last.End)
	st, err := j.State(ctxTimeout(t, 5*time.Second))
	require.NoError(t, err)
	require.Equal(t, first.End, st.LastSuccess.End, "the reset keeps the last success")
	require.Equal(t, first.Owner.Client, st.LastSuccess.Owner.Client, "and who ran it, not who reset it")
	require.Equal(t, os.Getpid(), st.LastSuccess.Owner.PID)
	require.Empty(t, st.LastSuccess.Owner.Name)

	second, err := j.Run(ctxTimeout(t, 10*time.Second), func(context.Context) error { return nil })
	require.NoError(t, err, "the next start after a reset runs the job")
	require.Equal(t, first.Slot, second.Slot)
}

// A start that finds the lock just taken (a holder that has not written its
// start yet) waits for the holder's record, and reports the holder's run,
// not the previous period's.
func TestJobBusyReportsTheHoldersRunOnceWritten(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	a, b := connect(t), connect(t)
	require.NoError(t, zklock.EnsureParents(ctxTimeout(t, 5*time.Second), a, p))
	_, err := obs.Create(p+".run", []byte(`{"slot":1,"periodMs":3600000,"owner":{"client":"old"},"start":3600000,"outcome":"succeeded"}`), 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	m, err := a.NewMutex(p) // the holder, between its lock and its start
	require.NoError(t, err)
	l, err := m.Acquire(ctxTimeout(t, 5*time.Second))
	require.NoError(t, err)
	defer l.Release(context.Background())
	jb, err := b.NewJob(p, time.Hour)
	require.NoError(t, err)
	got := make(chan zklock.Run, 1)
	go func() {
		run, err := jb.Run(ctxTimeout(t, 10*time.Second), func(context.Context) error { t.Error("ran beside the holder"); return nil })
		require.ErrorIs(t, err, zklock.ErrLocked)
		got <- run
	}()
	_, err = obs.Set(p+".run", []byte(`{"slot":99,"periodMs":3600000,"owner":{"client":"holder"},"start":356400000,"outcome":"running"}`), -1)
	require.NoError(t, err)
	run := <-got
	require.Equal(t, "running", run.Outcome)
	require.Equal(t, "holder", run.Owner.Client)
}
