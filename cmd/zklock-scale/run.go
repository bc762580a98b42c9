package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/zklock/zklock/zktest"
)

// runSpec is one measured run: a library, all primitives or mutexes only.
type runSpec struct {
	Name      string        `json:"run"`
	Lib       string        `json:"lib"`
	MutexOnly bool          `json:"mutex_only"`
	Offered   float64       `json:"offered_per_s,omitempty"` // a run of the knee sweep: the load offered
	Duration  time.Duration `json:"-"`
	Think     time.Duration `json:"-"` // the mean think time, when not the configuration's
}

// measured is what one run's workers and servers reported, before the
// figures are derived.
type measured struct {
	spec     runSpec
	procs    []workerMsg
	recs     []record
	before   serverSnap
	after    serverSnap
	watches  int64 // zk_watch_count summed over the servers, mid-run
	sessions int
}

// runOnce makes spec's lock paths, starts the workers, lets them run for
// spec.Duration between two snapshots of the servers, and collects their
// records; seq makes the run's paths its own.
func runOnce(ctx context.Context, cfg config, c *zktest.Cluster, spec runSpec, seq int) (m measured, err error) {
	m.spec = spec
	base := fmt.Sprintf("/scale/run%d", seq)
	if err := preparePaths(ctx, cfg, c, base, spec.MutexOnly); err != nil {
		return m, err
	}
	dir, err := os.MkdirTemp("", "zklock-scale-")
	if err != nil {
		return m, err
	}
	defer os.RemoveAll(dir)
	ws, err := startWorkers(ctx, cfg, c.Addrs(), spec, base, dir)
	defer func() {
		for _, w := range ws {
			if err != nil {
				w.kill()
			} else if ferr := w.finish(ctx); ferr != nil {
				err = ferr
			}
		}
	}()
	if err != nil {
		return m, err
	}
	if err := m.measure(ctx, cfg, c, ws); err != nil {
		return m, err
	}
	for i := range ws {
		recs, err := readRecords(recordsFile(dir, i))
		if err != nil {
			return m, err
		}
		m.recs = append(m.recs, recs...)
	}
	return m, nil
}

// preparePaths creates the run's lock paths on a session of its own.
func preparePaths(ctx context.Context, cfg config, c *zktest.Cluster, base string, mutexOnly bool) error {
	conn, err := rawConn(ctx, c.Addrs()[:1], cfg.sessionTimeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	return createPaths(ctx, conn, base, cfg.paths, mutexOnly, cfg.permits)
}

func recordsFile(dir string, i int) string { return filepath.Join(dir, fmt.Sprintf("worker%d.bin", i)) }

// startWorkers starts cfg.procs workers sharing cfg.sessions sessions and
// waits until all of them are connected.
func startWorkers(ctx context.Context, cfg config, addrs []string, spec runSpec, base, dir string) ([]*workerProc, error) {
	var ws []*workerProc
	for i := range cfg.procs {
		first, next := i*cfg.sessions/cfg.procs, (i+1)*cfg.sessions/cfg.procs
		w, err := startWorker(ctx, cfg.workerConfig(spec, addrs, base, first, next-first, recordsFile(dir, i)))
		if err != nil {
			return ws, err
		}
		ws = append(ws, w)
	}
	bound := time.Minute + time.Duration(cfg.sessions)*100*time.Millisecond + cfg.warmup + cfg.acquireTimeout
	for _, w := range ws {
		if _, err := w.expect(ctx, "ready", bound); err != nil {
			return ws, err
		}
	}
	return ws, nil
}

// measure starts the workers' loops between two snapshots of the servers,
// sampling the watches set halfway through.
func (m *measured) measure(ctx context.Context, cfg config, c *zktest.Cluster, ws []*workerProc) error {
	var err error
	if m.before, err = snapServers(c); err != nil {
		return err
	}
	for _, w := range ws {
		if err := w.send("go"); err != nil {
			return err
		}
	}
	if err := sleep(ctx, m.spec.Duration/2); err != nil {
		return err
	}
	if m.watches, err = watchCount(c); err != nil {
		return err
	}
	bound := m.spec.Duration/2 + cfg.acquireTimeout + 2*time.Minute
	for _, w := range ws {
		msg, err := w.expect(ctx, "done", bound)
		if err != nil {
			return err
		}
		m.procs = append(m.procs, msg)
		m.sessions += msg.Sessions
	}
	m.after, err = snapServers(c)
	return err
}

// sweepLibs are the locks of the knee sweep, in the order each load runs them.
var sweepLibs = []string{libZklock, libZklockNoOwn, libZkLock}

// runAll runs the mixed run, then the mutex-only runs of each library at the
// configured load, then the knee sweep (every library at one load before the
// next load), on one ensemble.
func runAll(ctx context.Context, cfg config, c *zktest.Cluster, progress func(string)) ([]measured, error) {
	specs := []runSpec{{Name: "mixed", Lib: libZklock, Duration: cfg.duration}}
	for _, lib := range sweepLibs {
		specs = append(specs, runSpec{Name: "mutex", Lib: lib, MutexOnly: true, Duration: cfg.compareDuration})
	}
	for _, load := range cfg.sweep {
		for _, lib := range sweepLibs {
			specs = append(specs, runSpec{Name: "sweep", Lib: lib, MutexOnly: true, Offered: load,
				Duration: cfg.sweepDuration, Think: thinkFor(load, cfg.sessions, cfg.hold)})
		}
	}
	specs = slices.DeleteFunc(specs, func(s runSpec) bool { return s.Duration <= 0 })
	if len(specs) == 0 {
		return nil, errors.New("zklock-scale: nothing to run (-duration and -compare-duration are 0)")
	}
	var out []measured
	for i, s := range specs {
		what := fmt.Sprintf("%s run with %s", s.Name, s.Lib)
		if s.Offered > 0 {
			what += fmt.Sprintf(" at %g/s offered", s.Offered)
		}
		progress(fmt.Sprintf("%s: %d sessions in %d processes for %v", what, cfg.sessions, cfg.procs, s.Duration))
		m, err := runOnce(ctx, cfg, c, s, i)
		if err != nil {
			return out, fmt.Errorf("%s run with %s: %w", s.Name, s.Lib, err)
		}
		out = append(out, m)
	}
	return out, nil
}
