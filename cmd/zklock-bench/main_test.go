package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestQuickProfile runs the benchmark program's short profile (every kind,
// the smallest workload of each shape, the latency run and a small cost
// curve) so that it cannot rot, and checks the figures that must be exact
// whatever the machine: request counts per acquisition, and no watch left;
// and that each latency has its hand-off limit.
func TestQuickProfile(t *testing.T) {
	var out bytes.Buffer
	cfg := config{duration: 300 * time.Millisecond, reps: 1, latency: time.Millisecond, curve: true, quick: true, json: true, kinds: "zklock,zklock-nowatch,zk.Lock,floor"}
	require.NoError(t, bench(context.Background(), cfg, &out))

	dec := json.NewDecoder(&out)
	var cells []cell
	var limits []handoffLimit
	for {
		var line struct {
			cell
			Limit *handoffLimit `json:"handoff_limit"`
			Queue []queuePoint  `json:"queue"`
		}
		if err := dec.Decode(&line); err != nil {
			require.ErrorIs(t, err, io.EOF)
			break
		}
		switch {
		case line.Limit != nil:
			limits = append(limits, *line.Limit)
		case line.Kind != "":
			cells = append(cells, line.cell)
		default:
			assert.NotEmpty(t, line.Queue, "the cost curve")
		}
	}
	require.Len(t, cells, 2*3*4, "two latencies × three workloads × four kinds")
	require.Len(t, limits, 2, "a hand-off limit per latency")
	for _, l := range limits {
		assert.Positive(t, l.CommitMs, "%s: floor commit time", l.Latency)
		assert.Positive(t, l.PerS, "%s: hand-off limit", l.Latency)
	}
	exact := map[string][2]float64{ // uncontended: writes, reads per cycle
		kindZklock:  {2, 1}, // create + listing (pipelined), whose child watch is the holder's: the warm-up held at once
		kindNoWatch: {2, 1},
		kindZkLock:  {2, 1},
		kindFloor:   {2, 1},
	}
	for _, c := range cells {
		assert.Zero(t, c.Watches, "%s %s %s: watches left", c.Latency, c.Workload, c.Kind)
		assert.Positive(t, c.Cycles, "%s %s %s", c.Latency, c.Workload, c.Kind)
		assert.InDelta(t, 2, c.Writes, 0.01, "%s %s %s: writes per acquisition", c.Latency, c.Workload, c.Kind)
		if c.Workload == "A" {
			assert.InDelta(t, exact[c.Kind][1], c.Reads, 0.01, "%s A %s: reads per cycle", c.Latency, c.Kind)
		}
	}
}

func TestPureHandoffLimits(t *testing.T) {
	samples := []commitSample{{"0s", 1}, {"1ms", 4}, {"0s", 0.5}, {"0s", 2}, {"1ms", 6}}
	medians := []cell{
		{Latency: "0s", Workload: "B W=2", Kind: kindZklock, OpsPerS: 740},
		{Latency: "0s", Workload: "B W=2", Kind: kindFloor, OpsPerS: 990},
		{Latency: "0s", Workload: "B W=8", Kind: kindZkLock, OpsPerS: 500},
		{Latency: "0s", Workload: "B W=2", Kind: kindZkLock, OpsPerS: 800},
	}
	ls := handoffLimits(samples, medians)
	require.Len(t, ls, 2)
	assert.Equal(t, handoffLimit{Latency: "0s", CommitMs: 1, PerS: 1000,
		BW2: []kindShare{{kindZklock, 0.74}, {kindZkLock, 0.8}}}, ls[0], "the median; lock kinds of B W=2 only")
	assert.Equal(t, handoffLimit{Latency: "1ms", CommitMs: 5, PerS: 200}, ls[1], "an even count averages the middle two")
	assert.Equal(t, "latency 0s: hand-off limit (1 / floor commit time 1.00 ms): 1000/s; B W=2: zklock 0.74, zk.Lock 0.80 of it", ls[0].String())
	assert.Equal(t, "latency 1ms: hand-off limit (1 / floor commit time 5.00 ms): 200/s", ls[1].String())
}

func TestPureQueuedWatches(t *testing.T) {
	assert.Equal(t, int64(0), queuedWatches(kindZkLock, 2))
	assert.Equal(t, int64(0), queuedWatches(kindZklock, 2))
	assert.Equal(t, int64(124), queuedWatches(kindZkLock, 128), "one per waiter, less three")
	assert.Equal(t, int64(251), queuedWatches(kindZklock, 128), "two per waiter, less three")
}

func TestPureTailFirst(t *testing.T) {
	names := []string{"_c_b-lock-0000000009", "x-0000000010", "_c_a-lock-0000000002"}
	assert.Equal(t, []string{"x-0000000010", "_c_b-lock-0000000009", "_c_a-lock-0000000002"}, tailFirst(names))
	assert.Equal(t, "_c_b-lock-0000000009", names[0], "the input is left alone")
}

func TestNiceCeil(t *testing.T) {
	for _, tc := range []struct{ in, want float64 }{{0.3, 0.5}, {1, 1}, {1.1, 2}, {3, 5}, {7, 10}, {420, 500}, {1500, 2000}} {
		assert.Equal(t, tc.want, niceCeil(tc.in), "%v", tc.in)
	}
}

func TestMedian(t *testing.T) {
	cells := []cell{
		{Workload: "A", Kind: "k", OpsPerS: 3, Watches: 0},
		{Workload: "A", Kind: "k", OpsPerS: 1, Watches: 2},
		{Workload: "A", Kind: "k", OpsPerS: 2, Watches: 0},
		{Workload: "B", Kind: "k", OpsPerS: 4},
	}
	m := median(cells)
	require.Len(t, m, 2)
	assert.Equal(t, 2.0, m[0].OpsPerS)
	assert.Equal(t, int64(2), m[0].Watches, "the worst run's watches, not the median")
	assert.Equal(t, 3, m[0].Rep)
	assert.Equal(t, 4.0, m[1].OpsPerS)
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
