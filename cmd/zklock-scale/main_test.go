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
	cfg := parseFlags([]string{"-quick"})
	doc := filepath.Join(t.TempDir(), "performance.md")
	begin, end := docmark.Markers(docProgram)
	require.NoError(t, os.WriteFile(doc, []byte("intro\n"+begin+"\nold\n"+end+"\n"), 0o644))
	cfg.doc = doc
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rs, err := scale(ctx, cfg, &out, testLog{t})
	require.NoError(t, err, "the quick profile needs ZooKeeper: run `make zk`")
	t.Log("\n" + out.String())

	require.Len(t, rs, 3, "mixed zklock, mutex zklock, mutex zk.Lock")
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
	assert.InDelta(t, 2, rs[1].Writes, 1e-9, "zklock mutex: 2 writes per acquisition")
	assert.InDelta(t, 2, rs[2].Writes, 1e-9, "zk.Lock: 2 writes per acquisition")

	written, err := os.ReadFile(doc)
	require.NoError(t, err)
	for _, row := range costRows {
		assert.Contains(t, out.String(), " "+row.label+" ", "row %q", row.label)
		assert.Contains(t, string(written), row.label, "row %q in the document", row.label)
	}
	for _, k := range []string{" mutex ", " read ", " write ", " permit ", " zk.Lock "} {
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
