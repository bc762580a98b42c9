// Command zklock-scale measures zklock at ensemble scale: it starts three
// voting ZooKeeper servers and one observer with production's fsync, spreads
// a thousand client sessions over them from several worker processes, and
// has every session lock paths drawn by a Zipf distribution (a few hot paths,
// a long tail) with a think time between acquisitions:
//
//	go run ./cmd/zklock-scale               # the mixed run, then the mutex pair
//	go run ./cmd/zklock-scale -quick        # 100 sessions for a few seconds
//	go run ./cmd/zklock-scale -json         # one JSON object per run
//	make bench-scale                        # the same, written into docs/performance.md
//
// The knee sweep then offers rising loads (-sweep, in acquisitions a second:
// the think time is the sessions divided by the load) to zklock, to zklock
// without the own-node watch and to zk.Lock, a short mutex-only run each,
// interleaved, and reports for each the highest load served with a p99 wait
// within -knee-p99.
//
// The mixed run uses all three primitives (mutexes on most paths, read/write
// locks and semaphores on one path in ten each); the mutex pair runs the same
// load with mutexes only, once with zklock and once with go-zookeeper's
// zk.Lock. Every worker records every holding, and the program fails if two
// holdings of one path ever broke its primitive's rule.
package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/zklock/zklock/internal/docmark"
)

type config struct {
	sessions        int
	procs           int
	paths           int
	duration        time.Duration
	compareDuration time.Duration
	think           time.Duration
	hold            time.Duration
	acquireTimeout  time.Duration
	sessionTimeout  time.Duration
	zipfS, zipfV    float64
	readShare       float64
	permits         int
	batch           int
	seed            uint64
	voters          int
	observers       int
	json            bool
	doc             string
	warmup          time.Duration // every run's sessions loop this long, unmeasured, before it starts
	sweep           []float64     // offered loads of the knee sweep, acquisitions/s (none: no sweep)
	sweepDuration   time.Duration // length of each run of the sweep
	kneeP99         time.Duration // the knee: the highest load served with a p99 wait within this
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-worker" { // hidden: a worker process
		os.Exit(workerMain())
	}
	cfg := parseFlags(os.Args[1:])
	if _, err := scale(context.Background(), cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// workerConfig is what the worker with sessions [first, first+count) of
// spec's run is told.
func (cfg config) workerConfig(spec runSpec, addrs []string, base string, first, count int, out string) workerConfig {
	return workerConfig{
		Lib: spec.Lib, MutexOnly: spec.MutexOnly, Addrs: addrs, Base: base, Paths: cfg.paths,
		First: first, Count: count, Think: cmp.Or(spec.Think, cfg.think), Hold: cfg.hold, AcquireTimeout: cfg.acquireTimeout,
		Duration: spec.Duration, Warmup: cfg.warmup, SessionTimeout: cfg.sessionTimeout, ZipfS: cfg.zipfS, ZipfV: cfg.zipfV,
		ReadShare: cfg.readShare, Permits: cfg.permits, Seed: cfg.seed, Batch: cfg.batch, Out: out,
	}
}

// scale starts the ensemble, runs every run, prints the report (to out,
// progress to log) and returns the runs' figures; it fails on any violation
// of mutual exclusion.
func scale(ctx context.Context, cfg config, out, log io.Writer) ([]result, error) {
	start := time.Now()
	c, stop, err := startServers(cfg.voters, cfg.observers)
	if err != nil {
		return nil, err
	}
	defer stop()
	progress := func(s string) { fmt.Fprintf(log, "zklock-scale: %v: %s\n", time.Since(start).Round(time.Second), s) }
	ms, err := runAll(ctx, cfg, c, progress)
	if err != nil {
		return nil, err
	}
	rs := make([]result, len(ms))
	for i, m := range ms {
		rs[i] = derive(m, cfg.permits)
	}
	if err := report(cfg, rs, out, time.Since(start)); err != nil {
		return rs, err
	}
	return rs, violated(rs)
}

func report(cfg config, rs []result, out io.Writer, took time.Duration) error {
	if cfg.json {
		return writeJSON(out, rs)
	}
	var text strings.Builder
	printReport(&text, cfg, rs)
	fmt.Fprintf(&text, "\ntotal %v\n", took.Round(time.Second))
	if _, err := io.WriteString(out, text.String()); err != nil {
		return err
	}
	if cfg.doc != "" {
		return docmark.Write(cfg.doc, docProgram, text.String())
	}
	return nil
}

// violated fails the program when any run broke mutual exclusion.
func violated(rs []result) error {
	for _, r := range rs {
		if r.Violations > 0 {
			return fmt.Errorf("zklock-scale: MUTUAL EXCLUSION VIOLATED in the %s run with %s: %d violations, the first %s",
				r.Name, r.Lib, r.Violations, r.FirstViolation)
		}
	}
	return nil
}
