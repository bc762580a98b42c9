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
// whatever the machine: request counts per acquisition, and no watch left.
func TestQuickProfile(t *testing.T) {
	var out bytes.Buffer
	cfg := config{duration: 300 * time.Millisecond, reps: 1, latency: time.Millisecond, curve: true, quick: true, json: true, kinds: "zklock,zklock-nowatch,zk.Lock,floor"}
	require.NoError(t, bench(context.Background(), cfg, &out))

	dec := json.NewDecoder(&out)
	var cells []cell
	for {
		var c cell
		if err := dec.Decode(&c); err != nil {
			require.ErrorIs(t, err, io.EOF)
			break
		}
		if c.Kind == "" {
			break // the cost curve
		}
		cells = append(cells, c)
	}
	require.Len(t, cells, 2*3*4, "two latencies × three workloads × four kinds")
	exact := map[string][2]float64{ // uncontended: writes, reads per cycle
		kindZklock:  {2, 2}, // create + listing (pipelined), own-node read
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
