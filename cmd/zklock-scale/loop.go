package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/zklock/zklock/internal/benchkit"
)

// tally counts what did not end in a holding.
type tally struct {
	Acquired   int64  `json:"acquired"`
	Timeouts   int64  `json:"timeouts"` // Acquire gave up at the acquire timeout
	Errors     int64  `json:"errors"`   // any other failure of Acquire or Release
	FirstError string `json:"first_error,omitempty"`
}

func (t *tally) add(o tally) {
	t.Acquired += o.Acquired
	t.Timeouts += o.Timeouts
	t.Errors += o.Errors
	if t.FirstError == "" {
		t.FirstError = o.FirstError
	}
}

func (t *tally) fail(err error) {
	t.Errors++
	if t.FirstError == "" {
		t.FirstError = err.Error()
	}
}

// runSessions runs every session's loop for wc.Duration and returns the
// worker's report and its records.
func runSessions(ctx context.Context, wc workerConfig, sessions []session) (workerMsg, []record) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	alloc0 := ms.TotalAlloc
	cpu0 := benchkit.ProcessCPU()
	stop := time.Now().Add(wc.Duration)
	recs := make([][]record, len(sessions))
	tallies := make([]tally, len(sessions))
	var wg sync.WaitGroup
	for j, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			idx := uint64(wc.First + j)
			r := rand.New(rand.NewPCG(wc.Seed, idx))
			recs[j], tallies[j] = loop(ctx, wc, s, r, stop)
		}()
	}
	wg.Wait()
	msg := workerMsg{Phase: "done", Sessions: len(sessions), CPUNs: int64(benchkit.ProcessCPU() - cpu0)}
	for _, t := range tallies {
		msg.add(t)
	}
	runtime.ReadMemStats(&ms)
	msg.HeapLive, msg.RSS, msg.AllocBytes = ms.HeapAlloc, processRSS(), ms.TotalAlloc-alloc0
	return msg, slices.Concat(recs...)
}

// loop is one session's life in a run: think, pick a path, acquire it
// within the acquire timeout, hold, release, until stop.
func loop(ctx context.Context, wc workerConfig, s session, r *rand.Rand, stop time.Time) ([]record, tally) {
	var recs []record
	var t tally
	pick := newPicker(r, wc.Paths, wc.ZipfS, wc.ZipfV)
	for {
		think := time.Duration(r.ExpFloat64() * float64(wc.Think))
		if time.Now().Add(think).After(stop) || sleep(ctx, think) != nil {
			return recs, t
		}
		i := pick.next()
		rec, err := once(ctx, wc, s, r, i)
		switch {
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			t.Timeouts++
		case err != nil:
			t.fail(err)
		}
		if rec.Grant != 0 {
			t.Acquired++
			recs = append(recs, rec)
		}
	}
}

// once makes one acquisition of path i: a record with Grant 0 when it
// was not granted.
func once(ctx context.Context, wc workerConfig, s session, r *rand.Rand, i int) (record, error) {
	actx, cancel := context.WithTimeout(ctx, wc.AcquireTimeout)
	defer cancel()
	rec := record{Path: int32(i), Call: time.Now().UnixNano()}
	release, k, err := s.acquire(actx, i, r)
	if err != nil {
		return record{}, err
	}
	rec.Grant, rec.Kind = time.Now().UnixNano(), k
	_ = sleep(ctx, wc.Hold)
	rec.Release = time.Now().UnixNano()
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	return rec, release(rctx)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
