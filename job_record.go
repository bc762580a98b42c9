package zklock

// A job's record as stored in ZooKeeper (<path>.run): the run and the
// last success, their encoding, and the reads and writes of it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
)

// jobRecord is a run as stored: times in the server's milliseconds.
type jobRecord struct {
	Slot     int64  `json:"slot"`
	Period   int64  `json:"periodMs"`
	Calendar string `json:"calendar,omitempty"`
	Owner    Owner  `json:"owner"`
	Start    int64  `json:"start"`
	Outcome  string `json:"outcome"`
	Cause    string `json:"cause,omitempty"`
	Error    string `json:"error,omitempty"`
	// End is the record's end, pinned by the next write of the record
	// (which moves the node's mtime); until then the mtime is the end.
	End int64 `json:"end,omitempty"`
	// LastSuccess is the last succeeded run before this one.
	LastSuccess *jobSuccess `json:"lastSuccess,omitempty"`
}

// jobSuccess is a succeeded run as the records after it remember it, with
// who ran it (records written before the owner was kept have none).
type jobSuccess struct {
	Slot  int64 `json:"slot"`
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	Owner Owner `json:"owner,omitzero"`
}

// readRecord is the record as read: the run, its data, its stat (nil when
// the node does not exist) and the last success up to it.
type readRecord struct {
	run     Run
	data    []byte
	stat    *zk.Stat
	success *jobSuccess
}

// read returns the record, within ctx and the session timeout.
func (j *Job) read(ctx context.Context) (readRecord, error) {
	c := j.m.c
	ctx, scope, err := c.begin(ctx, true)
	if err != nil {
		return readRecord{}, err
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
		return readRecord{}, nil
	case err != nil:
		return readRecord{}, fmt.Errorf("zklock: reading %s: %w", j.record, err)
	}
	run, success := decodeRun(r.data, r.stat)
	return readRecord{run: run, data: r.data, stat: r.stat, success: success}, nil
}

// readW is read with a watch on the record: the channel is closed when it
// changes (nil if the record does not exist).
func (j *Job) readW(ctx context.Context) (Run, <-chan struct{}, error) {
	c := j.m.c
	ctx, scope, err := c.begin(ctx, true)
	if err != nil {
		return Run{}, nil, err
	}
	defer scope.end()
	type got struct {
		data []byte
		stat *zk.Stat
		ev   <-chan zk.Event
	}
	r, err := call(ctx, c, func() (got, error) {
		data, stat, ev, err := c.conn.GetW(j.record)
		return got{data, stat, ev}, err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return Run{}, nil, nil
	case err != nil:
		return Run{}, nil, fmt.Errorf("zklock: reading %s: %w", j.record, err)
	}
	changed := make(chan struct{})
	go func() { // the watch fires once: at the change, or when the session goes
		<-r.ev
		close(changed)
	}()
	run, _ := decodeRun(r.data, r.stat)
	return run, changed, nil
}

// decodeRun turns a record into a Run (the zero Run for data that is not
// one) and the last success up to it.
func decodeRun(data []byte, stat *zk.Stat) (Run, *jobSuccess) {
	var rec jobRecord
	if json.Unmarshal(data, &rec) != nil || rec.Outcome == "" {
		return Run{}, nil
	}
	run := Run{Slot: rec.Slot, Period: time.Duration(rec.Period) * time.Millisecond, Calendar: rec.Calendar, Owner: rec.Owner, Start: time.UnixMilli(rec.Start),
		Outcome: rec.Outcome, Cause: rec.Cause, Error: rec.Error}
	if rec.Outcome != "running" {
		end := rec.End
		if end == 0 {
			end = stat.Mtime
		}
		run.End = time.UnixMilli(end)
	}
	if rec.Outcome == "reset" {
		// A reset is of the later of the period of the record it replaced
		// (its slot) and the one the clock gave at the reset (for a calendar
		// the job adds that: Job.recordSlot), so that the start after it runs
		// no earlier period than the one it replaced.
		run.Start = run.End
		if run.Period > 0 && rec.Calendar == "" {
			run.Slot = max(rec.Slot, run.End.UnixMilli()/run.Period.Milliseconds())
		}
	}
	success := rec.LastSuccess
	if rec.Outcome == "succeeded" {
		success = &jobSuccess{Slot: rec.Slot, Start: rec.Start, End: run.End.UnixMilli(), Owner: rec.Owner}
	}
	return run, success
}

// touch writes the record back (or creates it empty) under the lease and
// returns the write's time on the server's clock. An ended run's end is
// pinned into the data first, as the write moves the node's mtime. The
// version check refuses a record someone changed since it was read.
func (j *Job) touch(ctx context.Context, l *Lease, rec readRecord) (int64, error) {
	var ops []any
	if rec.stat == nil {
		ops = []any{&zk.CreateRequest{Path: j.record, Acl: j.m.c.opts.acl}, &zk.SetDataRequest{Path: j.record, Version: -1}}
	} else {
		ops = []any{&zk.SetDataRequest{Path: j.record, Data: pinEnd(rec.data, rec.stat), Version: rec.stat.Version}}
	}
	res, err := l.Multi(ctx, ops...)
	if err != nil {
		return 0, err
	}
	return res[len(res)-1].Stat.Mtime, nil
}

// pinEnd is a record's data with its end written in, if it has ended and
// the data does not say when.
func pinEnd(data []byte, stat *zk.Stat) []byte {
	var rec jobRecord
	if json.Unmarshal(data, &rec) != nil || rec.Outcome == "" || rec.Outcome == "running" || rec.End != 0 {
		return data
	}
	rec.End = stat.Mtime
	b, err := json.Marshal(rec)
	if err != nil {
		return data
	}
	return b
}

func encodeRun(run Run, success *jobSuccess) []byte {
	if run.Outcome == "" {
		return nil
	}
	rec := jobRecord{Slot: run.Slot, Period: run.Period.Milliseconds(), Calendar: run.Calendar, Owner: run.Owner, Start: run.Start.UnixMilli(),
		Outcome: run.Outcome, Cause: run.Cause, Error: run.Error, LastSuccess: success}
	b, _ := json.Marshal(rec)
	return b
}
