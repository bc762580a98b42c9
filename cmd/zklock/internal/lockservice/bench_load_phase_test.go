package lockservice_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zklock/zklock/internal/benchkit"
	"github.com/zklock/zklock/zktest"
)

// loadSnapshot is what a phase's figures are measured against: CPU used so
// far by this process (the callers), the service process and ZooKeeper, and
// ZooKeeper's counters.
type loadSnapshot struct {
	at                       time.Time
	callers, service, keeper time.Duration
	machine                  time.Duration // every process's, all cores (/proc/stat)
	mntr                     zktest.Mntr
}

func (e *loadEnv) snapshot() (loadSnapshot, error) {
	m, err := e.cluster.Mntr(0)
	if err != nil {
		return loadSnapshot{}, err
	}
	return loadSnapshot{
		at: time.Now(), mntr: m, callers: benchkit.ProcessCPU(),
		service: benchkit.PidCPU(e.child.pid), keeper: benchkit.PidCPU(e.cluster.Servers()[0].PID()),
		machine: machineCPU(),
	}, nil
}

// machineCPU is the CPU every process has used, on all cores (Linux; 0 if
// unknown): what else ran beside the benchmark shows as the difference.
func machineCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	var busy int64
	for i, v := range f[1:] {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && i != 3 && i != 4 && i < 8 {
			busy += n // all but idle and iowait, and not guest time (counted in user)
		}
	}
	return time.Duration(busy) * time.Second / 100 // USER_HZ
}

// grant is one acquisition: when it was granted and how long it waited.
type grant struct {
	at   time.Time
	wait time.Duration
}

// phase is one timed run of a set of workers: the grants inside its window
// by kind, and the snapshots at the window's ends.
type phase struct {
	waits         map[string][]time.Duration
	before, after loadSnapshot
	overlaps      int64
}

// runPhase runs workers: loadWarm untimed cycles each, a start barrier,
// loadPhase timed, then every worker ends its cycle. Workers 2i and 2i+1
// share a lock path; a counter per path checks that they never hold it
// together.
func (e *loadEnv) runPhase(ctx context.Context, workers []loadWorker) (phase, error) {
	ctx, cancel := context.WithTimeout(ctx, loadPhase+2*time.Minute)
	defer cancel()
	var (
		ready, done sync.WaitGroup
		start       = make(chan struct{})
		stop        atomic.Bool
		overlaps    atomic.Int64
		counters    = make([]atomic.Int32, (len(workers)+1)/2)
		grants      = make([][]grant, len(workers))
		errs        = make([]error, len(workers))
	)
	ready.Add(len(workers))
	done.Add(len(workers))
	for i, w := range workers {
		held := func() {
			if counters[i/2].Add(1) != 1 {
				overlaps.Add(1)
			}
			counters[i/2].Add(-1)
		}
		go func() {
			defer done.Done()
			grants[i], errs[i] = loadLoop(ctx, w, held, ready.Done, start, &stop)
		}()
	}
	ready.Wait()
	ph := phase{waits: map[string][]time.Duration{}}
	var err1, err2 error
	ph.before, err1 = e.snapshot()
	close(start)
	time.Sleep(loadPhase)
	ph.after, err2 = e.snapshot()
	stop.Store(true)
	done.Wait()
	if err := errors.Join(append(errs, err1, err2)...); err != nil {
		return ph, err
	}
	ph.overlaps = overlaps.Load()
	for i, gs := range grants {
		for _, g := range gs {
			if !g.at.Before(ph.before.at) && g.at.Before(ph.after.at) {
				ph.waits[workers[i].kind()] = append(ph.waits[workers[i].kind()], g.wait)
			}
		}
	}
	return ph, nil
}

// loadLoop is one worker's run: its warm-up, then cycles from start until
// stop, recording every grant.
func loadLoop(ctx context.Context, w loadWorker, held, warmed func(), start <-chan struct{}, stop *atomic.Bool) ([]grant, error) {
	for range loadWarm {
		if _, err := w.cycle(ctx, held); err != nil {
			warmed()
			return nil, fmt.Errorf("%s warm-up: %w", w.kind(), err)
		}
	}
	warmed()
	<-start
	var gs []grant
	for !stop.Load() {
		t0 := time.Now()
		wait, err := w.cycle(ctx, held)
		if err != nil {
			return gs, fmt.Errorf("%s: %w", w.kind(), err)
		}
		gs = append(gs, grant{at: t0.Add(wait), wait: wait})
	}
	return gs, nil
}
