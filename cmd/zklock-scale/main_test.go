package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/zklock/zklock/internal/docmark"
)

// TestMain lets the test binary be a worker too: the coordinator re-executes
// itself (here, the test binary) with -worker.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "-worker" {
		os.Exit(workerMain())
	}
	goleak.VerifyTestMain(m)
}

// TestQuickScale runs the quick profile end to end on a real ensemble (3
// voters and an observer, started here: `make zk` installs ZooKeeper) and
// checks what must hold whatever the machine: no violation, no timeout or
// error, exactly the writes the acquisitions make (2 each, 4 for a
// semaphore permit), and every row of the report, in the document too.
func TestQuickScale(t *testing.T) {
	// The quick profile with 24 sessions, shorter runs and one load in the
	// sweep: every kind of run, every primitive and every row is still made
	// and checked (the measurements are for -quick itself and the full
	// profile). 43 s alone, 64 s with 40 sessions and two loads.
	cfg := parseFlags([]string{"-quick", "-sessions", "24", "-sweep", "24", "-duration", "3s", "-compare-duration", "1500ms", "-sweep-duration", "1s"})
	doc := filepath.Join(t.TempDir(), "performance.md")
	begin, end := docmark.Markers(docProgram)
	require.NoError(t, os.WriteFile(doc, []byte("intro\n"+begin+"\nold\n"+end+"\n"), 0o644))
	cfg.doc = doc
	var out bytes.Buffer
	// About a minute alone; make test runs it beside other packages'
	// tests on 2 cores, where it took longer than 2 minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	rs, err := scale(ctx, cfg, &out, testLog{t})
	require.NoError(t, err, "the quick profile needs ZooKeeper: run `make zk`")
	t.Log("\n" + out.String())

	require.Len(t, rs, 4+3*len(cfg.sweep), "mixed zklock; mutex zklock, zklock-noown, zk.Lock; the same at each load of the sweep")
	for _, r := range rs {
		name := r.Name + " " + r.Lib
		assert.Equal(t, cfg.sessions, r.Sessions, name)
		assert.Zero(t, r.Violations, "%s: %s", name, r.FirstViolation)
		assert.Zero(t, r.Timeouts, name)
		assert.Zero(t, r.Errors, "%s: %s", name, r.FirstError)
		assert.Positive(t, r.Latencies[0].Acquired, name)
		assert.Equal(t, r.expectedWrites(), r.WritesTotal, "%s: writes", name)
	}
	kinds := map[string]bool{}
	for _, l := range rs[0].Latencies {
		kinds[l.Kind] = true
	}
	assert.Equal(t, map[string]bool{"all": true, "mutex": true, "read": true, "write": true, "permit": true}, kinds, "every kind in the mixed run")
	for _, r := range rs[1:] {
		assert.InDelta(t, 2, r.Writes, 1e-9, "%s %s at %g/s: 2 writes per acquisition", r.Name, r.Lib, r.Offered)
	}
	assert.Equal(t, []string{libZklock, libZklockNoOwn, libZkLock}, []string{rs[1].Lib, rs[2].Lib, rs[3].Lib})

	written, err := os.ReadFile(doc)
	require.NoError(t, err)
	for _, row := range costRows {
		assert.Contains(t, out.String(), " "+row.label+" ", "row %q", row.label)
		assert.Contains(t, string(written), row.label, "row %q in the document", row.label)
	}
	for _, k := range []string{" mutex ", " read ", " write ", " permit ", " zk.Lock ", " zklock-noown ", "knee sweep", "knee (the highest"} {
		assert.Contains(t, out.String(), k)
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

var _ io.Writer = testLog{}

func TestPurePrimitives(t *testing.T) {
	count := map[primitive]int{}
	for i := range 1000 {
		count[primitiveOf(i, false)]++
		require.Equal(t, primMutex, primitiveOf(i, true))
	}
	require.Equal(t, map[primitive]int{primMutex: 800, primRW: 100, primSemaphore: 100}, count)
	require.Equal(t, []primitive{primMutex, primRW, primSemaphore}, []primitive{primitiveOf(0, false), primitiveOf(1, false), primitiveOf(2, false)})
}

func TestPureSweepFlags(t *testing.T) {
	cfg := parseFlags([]string{"-sweep", "600, 800,1000"})
	assert.Equal(t, []float64{600, 800, 1000}, cfg.sweep)
	assert.Empty(t, parseFlags([]string{"-sweep", ""}).sweep)
	assert.Equal(t, []float64{100, 200}, parseFlags([]string{"-quick"}).sweep)
	_, err := parseSweep("600,x")
	assert.Error(t, err)
	// 1000 sessions offering 1000/s think 1 s less the hold.
	assert.Equal(t, 995*time.Millisecond, thinkFor(1000, 1000, 5*time.Millisecond))
}

func TestPureKnee(t *testing.T) {
	run := func(lib string, offered, served, p99 float64, timeouts int64) result {
		r := result{runSpec: runSpec{Name: "sweep", Lib: lib, Offered: offered}, Latencies: []latencies{{Kind: "all", AcqPerS: served, WaitP99: p99}}}
		r.Timeouts = timeouts
		return r
	}
	rs := []result{
		run(libZklock, 600, 598, 20, 0), run(libZkLock, 600, 599, 18, 0),
		run(libZklock, 800, 790, 90, 0), run(libZkLock, 800, 797, 150, 0),
		run(libZklock, 1000, 900, 2500, 0), run(libZkLock, 1000, 960, 80, 3),
	}
	k, ok := knee(rs, libZklock, 100*time.Millisecond)
	require.True(t, ok)
	assert.Equal(t, 800.0, k.Offered)
	k, ok = knee(rs, libZkLock, 100*time.Millisecond)
	require.True(t, ok)
	assert.Equal(t, 600.0, k.Offered, "a p99 over the bound, or a timeout, is past the knee")
	_, ok = knee(rs, libZklockNoOwn, 100*time.Millisecond)
	assert.False(t, ok)
}
