package zklockotel_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/metrics/zklockotel"
)

// The Prometheus adapter's bucket boundaries, written out.
var (
	waitBounds  = []float64{0.0005, 0.002, 0.008, 0.032, 0.128, 0.512, 2.048, 8.192, 32.768, 131.072}
	queueBounds = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}
	holdBounds  = []float64{0.001, 0.004, 0.016, 0.064, 0.256, 1.024, 4.096, 16.384, 65.536, 262.144, 1048.576, 4194.304}
)

// Every observation lands in its instrument with the exact value, bucket
// and attributes, every outcome and cause included; the adapter needs no
// server (zklock calls it).
func TestRecordsEveryObservation(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	m, err := zklockotel.New(provider.Meter("test"))
	require.NoError(t, err)

	m.Acquired(zklock.KindMutex, 250*time.Millisecond, nil)
	m.Acquired(zklock.KindMutex, time.Second, fmt.Errorf("x: %w", zklock.ErrLocked))
	m.Acquired(zklock.KindMutex, 125*time.Millisecond, fmt.Errorf("acquire: %w", context.DeadlineExceeded))
	m.Acquired(zklock.KindMutex, time.Millisecond, errors.New("zk: not authenticated"))
	m.Acquired(zklock.KindSemaphore, 2*time.Second, fmt.Errorf("%w: %w", zklock.ErrUnreachable, context.DeadlineExceeded))
	m.Acquired(zklock.KindWrite, 3*time.Second, context.Canceled)
	m.Queued(zklock.KindMutex, 3)
	m.Queued(zklock.KindMutex, 600) // past the last bound
	m.Queued(zklock.KindSemaphore, 1)
	m.Ended(zklock.KindMutex, 500*time.Millisecond, zklock.ErrReleased)
	m.Ended(zklock.KindRead, time.Second, fmt.Errorf("%w: session expired: %w", zklock.ErrLockLost, zk.ErrSessionExpired))
	m.Ended(zklock.KindWrite, 2*time.Millisecond, fmt.Errorf("%w: no word from ZooKeeper", zklock.ErrLockLost))
	m.Ended(zklock.KindWrite, 3*time.Millisecond, zklock.ErrClosed)
	m.CleanerDeleted("/p")
	m.Retried()
	m.Retried()
	m.MultiLockYielded([]string{"/a", "/b"})

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	require.Len(t, rm.ScopeMetrics, 1)
	got := map[string]metricdata.Metrics{}
	for _, md := range rm.ScopeMetrics[0].Metrics {
		got[md.Name] = md
	}
	require.Len(t, got, 7)

	kind := func(k string) attribute.KeyValue { return attribute.String("zklock.kind", k) }
	outcome := func(o string) attribute.KeyValue { return attribute.String("zklock.outcome", o) }
	cause := func(c string) attribute.KeyValue { return attribute.String("zklock.cause", c) }
	want := []metricdata.Metrics{
		{
			Name: "zklock.acquire.wait", Unit: "s", Description: "Time from Acquire to its return, by outcome.",
			Data: metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality, DataPoints: []metricdata.HistogramDataPoint[float64]{
				point(waitBounds, []float64{0.25}, 5, kind("mutex"), outcome("granted")),
				point(waitBounds, []float64{1}, 6, kind("mutex"), outcome("locked")),
				point(waitBounds, []float64{0.125}, 4, kind("mutex"), outcome("timeout")),
				point(waitBounds, []float64{0.001}, 1, kind("mutex"), outcome("error")),
				point(waitBounds, []float64{2}, 6, kind("semaphore"), outcome("unreachable")),
				point(waitBounds, []float64{3}, 7, kind("write"), outcome("timeout")),
			}},
		},
		{
			Name: "zklock.queue.length", Unit: "{node}", Description: "Lock nodes on the path when an Acquire joined, itself included.",
			Data: metricdata.Histogram[int64]{Temporality: metricdata.CumulativeTemporality, DataPoints: []metricdata.HistogramDataPoint[int64]{
				point(queueBounds, []int64{3, 600}, []int{2, 10}, kind("mutex")),
				point(queueBounds, []int64{1}, 0, kind("semaphore")),
			}},
		},
		{
			Name: "zklock.hold", Unit: "s", Description: "Time a lease was held, until released, lost or closed.",
			Data: metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality, DataPoints: []metricdata.HistogramDataPoint[float64]{
				point(holdBounds, []float64{0.5}, 5, kind("mutex")),
				point(holdBounds, []float64{1}, 5, kind("read")),
				point(holdBounds, []float64{0.002, 0.003}, []int{1, 1}, kind("write")),
			}},
		},
		{
			Name: "zklock.leases.lost", Unit: "{lease}", Description: "Leases that ended without Release, by cause.",
			Data: metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true, DataPoints: []metricdata.DataPoint[int64]{
				{Attributes: attribute.NewSet(kind("read"), cause("session_expired")), Value: 1},
				{Attributes: attribute.NewSet(kind("write"), cause("connection_lost")), Value: 1},
			}},
		},
		counter("zklock.cleaner.deletions", "{path}", "Empty lock paths the cleaner removed.", 1),
		counter("zklock.requests.retried", "{request}", "Requests sent again after their connection dropped.", 2),
		counter("zklock.multilock.yields", "{attempt}", "MultiLock attempts that let go to break a wait-for cycle with another client.", 1),
	}
	for _, w := range want {
		metricdatatest.AssertEqual(t, w, got[w.Name], metricdatatest.IgnoreTimestamp())
	}
}

// point is the histogram data point of values, each in the bucket of the
// same index in buckets (an int, or an []int for several values).
func point[N int64 | float64](bounds []float64, values []N, buckets any, attrs ...attribute.KeyValue) metricdata.HistogramDataPoint[N] {
	idx, ok := buckets.([]int)
	if !ok {
		idx = []int{buckets.(int)}
	}
	p := metricdata.HistogramDataPoint[N]{
		Attributes:   attribute.NewSet(attrs...),
		Bounds:       bounds,
		BucketCounts: make([]uint64, len(bounds)+1),
		Count:        uint64(len(values)),
	}
	lo, hi := values[0], values[0]
	for i, v := range values {
		p.BucketCounts[idx[i]]++
		p.Sum += v
		lo, hi = min(lo, v), max(hi, v)
	}
	p.Min, p.Max = metricdata.NewExtrema(lo), metricdata.NewExtrema(hi)
	return p
}

func counter(name, unit, desc string, n int64) metricdata.Metrics {
	return metricdata.Metrics{Name: name, Unit: unit, Description: desc, Data: metricdata.Sum[int64]{
		Temporality: metricdata.CumulativeTemporality, IsMonotonic: true,
		DataPoints: []metricdata.DataPoint[int64]{{Attributes: attribute.NewSet(), Value: n}},
	}}
}

// A meter that refuses an instrument makes New fail, naming it, rather than
// return an adapter with an unusable instrument.
func TestNewReportsInstrumentErrors(t *testing.T) {
	m, err := zklockotel.New(refusingMeter{})
	require.ErrorContains(t, err, "zklock.leases.lost")
	require.Nil(t, m)
}

// refusingMeter refuses every Int64Counter.
type refusingMeter struct{ noop.Meter }

func (refusingMeter) Int64Counter(name string, _ ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return noop.Int64Counter{}, errors.New("refused " + name)
}
