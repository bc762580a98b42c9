// Command zklock-bench measures zklock beside go-zookeeper's zk.Lock and the
// bare client, in one run on one ZooKeeper that it starts itself with
// production's fsync of every write (or on the servers in
// $ZKLOCK_TEST_SERVERS), so that ratios, not absolute times, carry the
// result:
//
//	go run ./cmd/zklock-bench            # the table, the latency run and the cost curve
//	go run ./cmd/zklock-bench -json      # the same, one JSON object per line
//	make bench                           # the same, with the plot written to doc/
//
// Workloads: A, one worker cycling acquire/release on its own path; B, W
// workers on one path (W = 2, 8, 32, 128); D, P workers each on its own path
// (P = 8, 64). The hand-off limit, 1 / the floor's commit time (one session's
// sequential writes), is measured in each env and B W=2 compared with it. The
// cost curve queues up to 5 000 sessions on one path (queuecurve.go). Every worker has its own session, as separate processes would.
// Every kind runs each workload once per repetition, interleaved, and the
// table shows medians. Request and watch counts come from the server's mntr.
// Every contended run checks mutual exclusion, and the program fails if two
// workers ever held one path at once.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/zklock/zklock/internal/docmark"
	"github.com/zklock/zklock/zktest"
)

type config struct {
	duration time.Duration
	reps     int
	latency  time.Duration
	curve    bool
	quick    bool
	json     bool
	plot     string
	kinds    string // comma-separated subset of allKinds
	only     string // run only workloads whose name contains this
	cpuProf  string
	memProf  string
	doc      string // write the tables into this document too (doc.go)
}

func main() {
	var cfg config
	flag.DurationVar(&cfg.duration, "duration", 1200*time.Millisecond, "length of one measured run")
	flag.IntVar(&cfg.reps, "reps", 3, "interleaved repetitions of every run (the table shows medians)")
	flag.DurationVar(&cfg.latency, "latency", time.Millisecond, "one-way delay of the latency run's proxy (0: no latency run)")
	flag.BoolVar(&cfg.curve, "curve", true, "measure the cost curve (queue length, paths held, memory)")
	flag.BoolVar(&cfg.quick, "quick", false, "a few small runs only: a check that the benchmark works")
	flag.BoolVar(&cfg.json, "json", false, "print JSON lines instead of tables")
	flag.StringVar(&cfg.plot, "plot", "", "write the cost curve as an SVG to this file")
	flag.StringVar(&cfg.kinds, "kinds", strings.Join(allKinds, ","), "kinds to measure")
	flag.StringVar(&cfg.only, "only", "", "run only the workloads whose name contains this (e.g. \"W=8\")")
	flag.StringVar(&cfg.cpuProf, "cpuprofile", "", "write a CPU profile of the sweep to this file")
	flag.StringVar(&cfg.memProf, "memprofile", "", "write an allocation profile to this file after the sweep")
	flag.StringVar(&cfg.doc, "doc", "", "also write the tables into this Markdown `file`, between its zklock-bench markers")
	flag.Parse()
	if err := bench(context.Background(), cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "zklock-bench:", err)
		os.Exit(1)
	}
}

// workloads are the shapes measured; quick keeps the smallest of each.
func workloads(cfg config) []workload {
	var out []workload
	for _, w := range allWorkloads(cfg.quick) {
		if strings.Contains(w.name, cfg.only) {
			out = append(out, w)
		}
	}
	return out
}

func allWorkloads(quick bool) []workload {
	if quick {
		return []workload{{"A", 1, 1}, {"B W=8", 8, 1}, {"D 8 paths", 8, 8}}
	}
	return []workload{
		{"A", 1, 1},
		{"B W=2", 2, 1}, {"B W=8", 8, 1}, {"B W=32", 32, 1}, {"B W=128", 128, 1},
		{"D 8 paths", 8, 8}, {"D 64 paths", 64, 64},
	}
}

func bench(ctx context.Context, cfg config, out io.Writer) error {
	start := time.Now()
	cluster, stop, err := zktest.StartMain(zktest.WithTickTime(500*time.Millisecond), zktest.WithForceSync())
	if err != nil {
		return err
	}
	defer stop()
	direct := &env{cluster: cluster, dial: cluster.Addrs()}
	envs := []*env{direct}
	if cfg.latency > 0 {
		proxy, err := zktest.ListenProxy(cluster.Addrs()...)
		if err != nil {
			return err
		}
		defer proxy.Close()
		proxy.SetDelay(cfg.latency)
		envs = append(envs, &env{cluster: cluster, dial: []string{proxy.Addr()}, latency: cfg.latency})
	}
	var commits []commitSample
	cells, err := profiled(cfg, func() ([]cell, error) { return sweep(ctx, cfg, envs, &commits) })
	if err != nil {
		return err
	}
	limits := handoffLimits(commits, median(cells))
	var curve *costCurve
	if cfg.curve {
		if curve, err = measureCurve(ctx, cfg, direct); err != nil {
			return err
		}
	}
	if cfg.json {
		return writeJSON(out, cells, limits, curve)
	}
	var report strings.Builder
	if cfg.doc != "" {
		out = io.MultiWriter(out, &report)
	}
	if err := writeText(out, cfg, cells, limits, curve); err != nil {
		return err
	}
	fmt.Fprintf(out, "\ntotal %v\n", time.Since(start).Round(time.Second))
	if cfg.doc != "" {
		return docmark.Write(cfg.doc, docProgram, report.String())
	}
	return nil
}

// writeText prints the table, the hand-off limits and the cost curve, and
// writes the plot when asked.
func writeText(out io.Writer, cfg config, cells []cell, limits []handoffLimit, curve *costCurve) error {
	fmt.Fprintf(out, "zklock-bench: %d repetitions of %v each, medians; per-acquisition figures (writes, reads, watch events, CPU, allocations, bytes) are per cycle\n\n", cfg.reps, cfg.duration)
	printTable(out, median(cells))
	fmt.Fprintln(out)
	for _, l := range limits {
		fmt.Fprintln(out, l)
	}
	if curve == nil {
		return nil
	}
	fmt.Fprintln(out)
	curve.print(out)
	if cfg.plot != "" {
		if err := os.WriteFile(cfg.plot, curve.svg(), 0o644); err != nil {
			return err
		}
		fmt.Fprintln(out, "\nplot written to", cfg.plot)
	}
	return nil
}

// sweep runs every workload for every kind in every env, cfg.reps times,
// interleaved: each repetition visits every cell once, with the kinds in a
// rotated order so no kind always runs first. Each repetition also measures
// every env's floor commit time (the hand-off limit) into commits.
func sweep(ctx context.Context, cfg config, envs []*env, commits *[]commitSample) ([]cell, error) {
	var cells []cell
	kinds := strings.Split(cfg.kinds, ",")
	for rep := range cfg.reps {
		for _, e := range envs {
			commit, err := e.commitTime(ctx, cfg.duration)
			if err != nil {
				return nil, fmt.Errorf("floor commit time, latency %v: %w", e.latency, err)
			}
			*commits = append(*commits, commitSample{e.latency.String(), commit})
			for _, w := range workloads(cfg) {
				for i := range kinds {
					kind := kinds[(i+rep)%len(kinds)]
					c, err := e.run(ctx, kind, w, cfg.duration)
					if err != nil {
						return nil, fmt.Errorf("%s, %s, latency %v: %w", w.name, kind, e.latency, err)
					}
					c.Rep = rep
					cells = append(cells, c)
				}
			}
		}
	}
	return cells, nil
}

// profiled runs f under the CPU profile and writes the allocation profile
// after it, when asked.
func profiled(cfg config, f func() ([]cell, error)) ([]cell, error) {
	if cfg.memProf != "" {
		runtime.MemProfileRate = 512
	}
	if cfg.cpuProf != "" {
		pf, err := os.Create(cfg.cpuProf)
		if err != nil {
			return nil, err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return nil, err
		}
		defer pprof.StopCPUProfile()
	}
	cells, err := f()
	if err == nil && cfg.memProf != "" {
		var pf *os.File
		if pf, err = os.Create(cfg.memProf); err == nil {
			err = pprof.Lookup("allocs").WriteTo(pf, 0)
			pf.Close()
		}
	}
	return cells, err
}

// writeJSON prints the median cells, then one {"handoff_limit": ...} per
// latency, then the cost curve.
func writeJSON(out io.Writer, cells []cell, limits []handoffLimit, curve *costCurve) error {
	enc := json.NewEncoder(out)
	for _, c := range median(cells) {
		if err := enc.Encode(c); err != nil {
			return err
		}
	}
	for _, l := range limits {
		if err := enc.Encode(struct {
			L handoffLimit `json:"handoff_limit"`
		}{l}); err != nil {
			return err
		}
	}
	if curve != nil {
		return enc.Encode(curve)
	}
	return nil
}
