package main

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zklock/zklock/internal/benchkit"
	"github.com/zklock/zklock/zktest"
)

// workload is one shape of load: workers lockers, spread over paths lock
// paths (workers/paths on each).
type workload struct {
	name    string // "A", "B W=8", "D 64 paths"
	workers int
	paths   int
}

// cell is what one run of one kind on one workload measured.
type cell struct {
	Workload string  `json:"workload"`
	Kind     string  `json:"kind"`
	Latency  string  `json:"latency"` // the proxy's one-way delay, "0s" without proxy
	Rep      int     `json:"rep"`
	Cycles   int     `json:"cycles"`
	OpsPerS  float64 `json:"ops_per_s"`
	WaitP50  float64 `json:"wait_p50_ms"`
	WaitP99  float64 `json:"wait_p99_ms"`
	Writes   float64 `json:"writes_per_acq"`
	Reads    float64 `json:"reads_per_acq"`
	WatchEv  float64 `json:"watch_events_per_acq"`
	Watches  int64   `json:"watches_left"`
	CPUus    float64 `json:"client_cpu_us_per_acq"`
	SrvCPUus float64 `json:"server_cpu_us_per_acq"`
	Allocs   float64 `json:"allocs_per_acq"`
	BytesIn  float64 `json:"bytes_to_server_per_acq"`
	BytesOut float64 `json:"response_bytes_per_acq"`
}

// env is where runs happen: the server, and the address clients dial (a
// delaying proxy, or the server itself).
type env struct {
	cluster *zktest.Cluster
	dial    []string
	latency time.Duration
	seq     atomic.Int64 // fresh lock paths
}

// run measures kind on w for about d, after every worker has locked once.
func (e *env) run(ctx context.Context, kind string, w workload, d time.Duration) (cell, error) {
	ls, err := e.lockers(ctx, kind, w)
	defer func() {
		for _, l := range ls {
			l.close()
		}
	}()
	if err != nil {
		return cell{}, err
	}
	for _, l := range ls { // warm-up: paths exist, connections are hot
		if err := cycle(ctx, l); err != nil {
			return cell{}, err
		}
	}
	// Then the workers run as they will be measured for a moment, so that
	// what a client remembers of its paths (whether it took them at once)
	// is the workload's, not the one-at-a-time warm-up's.
	_, overlaps, err := drive(ctx, ls, w.paths, warmUp)
	switch {
	case err != nil:
		return cell{}, err
	case overlaps > 0 && isLock(kind):
		return cell{}, fmt.Errorf("%s on %s, warm-up: MUTUAL EXCLUSION VIOLATED: %d overlapping holds", kind, w.name, overlaps)
	}
	before, err := e.snapshot(ctx)
	if err != nil {
		return cell{}, err
	}
	waits, overlaps, runErr := drive(ctx, ls, w.paths, d)
	after, err := e.snapshot(ctx)
	switch {
	case runErr != nil:
		return cell{}, runErr
	case err != nil:
		return cell{}, err
	case overlaps > 0 && isLock(kind):
		return cell{}, fmt.Errorf("%s on %s: MUTUAL EXCLUSION VIOLATED: %d overlapping holds", kind, w.name, overlaps)
	}
	return measure(kind, w, e.latency, waits, before, after), nil
}

func (e *env) lockers(ctx context.Context, kind string, w workload) ([]locker, error) {
	base := fmt.Sprintf("/bench/%d", e.seq.Add(1))
	ls := make([]locker, 0, w.workers)
	for i := range w.workers {
		l, err := newLocker(ctx, kind, e.dial, fmt.Sprintf("%s/p%d", base, i%w.paths))
		if err != nil {
			return ls, err
		}
		ls = append(ls, l)
	}
	return ls, nil
}

// warmUp is how long the workers run before a measured run.
const warmUp = 300 * time.Millisecond

func cycle(ctx context.Context, l locker) error {
	if err := l.lock(ctx); err != nil {
		return err
	}
	return l.unlock(ctx)
}

// drive runs every locker in a loop of lock/unlock for d and returns each
// acquisition's wait, and how often two workers on one path held at once.
func drive(ctx context.Context, ls []locker, paths int, d time.Duration) ([]time.Duration, int64, error) {
	inside := make([]atomic.Int32, paths)
	var overlaps atomic.Int64
	waits := make([][]time.Duration, len(ls))
	errs := make([]error, len(ls))
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for i, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := &inside[i%paths]
			for time.Now().Before(stop) {
				t0 := time.Now()
				if errs[i] = l.lock(ctx); errs[i] != nil {
					return
				}
				waits[i] = append(waits[i], time.Since(t0))
				if in.Add(1) != 1 {
					overlaps.Add(1)
				}
				runtime.Gosched() // let another holder show itself, if there is one
				in.Add(-1)
				if errs[i] = l.unlock(ctx); errs[i] != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, 0, err
		}
	}
	return slices.Concat(waits...), overlaps.Load(), nil
}

// snapshot is the state a run is measured against.
type snapshot struct {
	at        time.Time
	mntr      zktest.Mntr
	cpu       time.Duration // this process
	serverCPU time.Duration // the server process, when it runs here
	mallocs   uint64
}

func (e *env) snapshot(ctx context.Context) (snapshot, error) {
	m, err := e.cluster.Mntr(0)
	if err != nil {
		return snapshot{}, err
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return snapshot{at: time.Now(), mntr: m, cpu: benchkit.ProcessCPU(), serverCPU: benchkit.PidCPU(e.cluster.Servers()[0].PID()), mallocs: ms.Mallocs}, nil
}

func measure(kind string, w workload, latency time.Duration, waits []time.Duration, b, a snapshot) cell {
	n := float64(len(waits))
	slices.Sort(waits)
	per := func(key string) float64 { return float64(a.mntr.Int(key)-b.mntr.Int(key)) / n }
	return cell{
		Workload: w.name,
		Kind:     kind,
		Latency:  latency.String(),
		Cycles:   len(waits),
		OpsPerS:  n / a.at.Sub(b.at).Seconds(),
		WaitP50:  ms(waits[len(waits)/2]),
		WaitP99:  ms(waits[len(waits)*99/100]),
		Writes:   per("zk_cnt_updatelatency"),
		Reads:    per("zk_cnt_readlatency"),
		WatchEv:  float64(zktest.WatchEventsFired(b.mntr, a.mntr)) / n,
		Watches:  a.mntr.WatchCount(),
		CPUus:    float64((a.cpu - b.cpu).Microseconds()) / n,
		SrvCPUus: float64((a.serverCPU - b.serverCPU).Microseconds()) / n,
		Allocs:   float64(a.mallocs-b.mallocs) / n,
		BytesIn:  per("zk_bytes_received_count"),
		BytesOut: per("zk_response_bytes"),
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
