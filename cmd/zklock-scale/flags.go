package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// parseFlags reads the command line; -quick picks the small profile, which
// explicit flags still override.
func parseFlags(args []string) config {
	var cfg config
	fs := flag.NewFlagSet("zklock-scale", flag.ExitOnError)
	quick := fs.Bool("quick", false, "the small profile: 100 sessions, 2 processes, 10s and 5s runs, a sweep of "+quickSweep+"/s for 3s each")
	fs.IntVar(&cfg.sessions, "sessions", 1000, "client sessions in all")
	fs.IntVar(&cfg.procs, "procs", 4, "worker processes sharing the sessions")
	fs.IntVar(&cfg.paths, "paths", 10000, "lock paths")
	fs.DurationVar(&cfg.duration, "duration", 5*time.Minute, "length of the mixed run (0: skip it)")
	fs.DurationVar(&cfg.compareDuration, "compare-duration", 2*time.Minute, "length of each mutex-only run, zklock and zk.Lock (0: skip them)")
	fs.DurationVar(&cfg.think, "think", time.Second, "mean think time between a release and the next acquire (exponential)")
	fs.DurationVar(&cfg.hold, "hold", 5*time.Millisecond, "how long a lock is held")
	fs.DurationVar(&cfg.acquireTimeout, "acquire-timeout", 10*time.Second, "how long an acquire waits before giving up (zklock)")
	fs.DurationVar(&cfg.sessionTimeout, "session-timeout", 12*time.Second, "session timeout asked for")
	fs.Float64Var(&cfg.zipfS, "zipf-s", 1.1, "Zipf exponent of the path choice (> 1)")
	fs.Float64Var(&cfg.zipfV, "zipf-v", 4, "Zipf offset of the path choice (>= 1; larger flattens the head)")
	fs.Float64Var(&cfg.readShare, "read-share", 0.9, "share of reads on read/write paths")
	fs.IntVar(&cfg.permits, "permits", 3, "permits of each semaphore")
	fs.IntVar(&cfg.batch, "batch", 25, "sessions a worker connects at once")
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of the sessions' random choices")
	fs.BoolVar(&cfg.json, "json", false, "print one JSON object per run instead of tables")
	fs.DurationVar(&cfg.warmup, "warmup", 20*time.Second, "how long every run's sessions loop, unmeasured, before it starts (a client's guesses need its recent acquisitions)")
	sweep := fs.String("sweep", "600,800,1000,1200,1400,1600", "offered loads of the knee sweep, acquisitions/s, comma-separated (empty: no sweep)")
	fs.DurationVar(&cfg.sweepDuration, "sweep-duration", 20*time.Second, "length of each run of the knee sweep")
	fs.DurationVar(&cfg.kneeP99, "knee-p99", 100*time.Millisecond, "the knee: the highest load served with a p99 wait within this")
	fs.StringVar(&cfg.doc, "doc", "", "also write the tables into this Markdown `file`, between its zklock-scale markers")
	_ = fs.Parse(args)
	cfg.voters, cfg.observers = 3, 1
	if *quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		quickProfile(&cfg, set)
		if !set["sweep"] {
			*sweep = quickSweep
		}
	}
	var err error
	if cfg.sweep, err = parseSweep(*sweep); err != nil {
		fmt.Fprintln(os.Stderr, err)
		fs.Usage()
		os.Exit(2)
	}
	if cfg.sessions < 1 || cfg.procs < 1 || cfg.paths < 1 || cfg.zipfS <= 1 || cfg.zipfV < 1 || cfg.batch < 1 || cfg.permits < 1 {
		fs.Usage()
		os.Exit(2)
	}
	cfg.procs = min(cfg.procs, cfg.sessions)
	return cfg
}

// quickProfile shrinks the defaults the command line did not set.
func quickProfile(cfg *config, set map[string]bool) {
	q := quickConfig()
	if !set["sessions"] {
		cfg.sessions = q.sessions
	}
	if !set["procs"] {
		cfg.procs = q.procs
	}
	if !set["duration"] {
		cfg.duration = q.duration
	}
	if !set["compare-duration"] {
		cfg.compareDuration = q.compareDuration
	}
	if !set["sweep-duration"] {
		cfg.sweepDuration = q.sweepDuration
	}
	if !set["warmup"] {
		cfg.warmup = q.warmup
	}
}

// quickSweep is the quick profile's sweep: two loads for its 100 sessions.
const quickSweep = "100,200"

// parseSweep reads -sweep: positive loads, comma-separated.
func parseSweep(s string) ([]float64, error) {
	var out []float64
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("zklock-scale: -sweep: %q is not a positive load", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// thinkFor is the mean think time that offers load acquisitions a second
// from sessions sessions holding each for hold (waits not counted: the load
// served falls below the load offered as they grow).
func thinkFor(load float64, sessions int, hold time.Duration) time.Duration {
	return max(time.Duration(float64(sessions)/load*float64(time.Second))-hold, time.Millisecond)
}

// quickConfig is the small profile's size (the test runs it).
func quickConfig() config {
	return config{sessions: 100, procs: 2, duration: 10 * time.Second, compareDuration: 5 * time.Second, sweepDuration: 3 * time.Second, warmup: time.Second}
}
