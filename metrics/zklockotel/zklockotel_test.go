package zklockotel_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/metrics/zklockotel"
)

// Every observation lands in its instrument with the exact value and
// attributes; the adapter needs no server (zklock calls it).
func TestRecordsEveryObservation(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	m, err := zklockotel.New(provider.Meter("test"))
	require.NoError(t, err)

	m.Acquired(zklock.KindMutex, 250*time.Millisecond, nil)
	m.Acquired(zklock.KindMutex, time.Second, fmt.Errorf("x: %w", zklock.ErrLocked))
	m.Acquired(zklock.KindSemaphore, 2*time.Second, fmt.Errorf("%w: %w", zklock.ErrUnreachable, context.DeadlineExceeded))
	m.Queued(zklock.KindMutex, 3)
	m.Ended(zklock.KindMutex, 500*time.Millisecond, zklock.ErrReleased)
	m.Ended(zklock.KindRead, time.Second, fmt.Errorf("%w: session expired: %w", zklock.ErrLockLost, zk.ErrSessionExpired))
	m.CleanerDeleted("/p")
	m.Retried()
	m.Retried()
	m.MultiLockYielded([]string{"/a", "/b"})

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	got := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, md := range sm.Metrics {
			got[md.Name] = md.Data
		}
	}
	require.Len(t, got, 7)

	wait := got["zklock.acquire.wait"].(metricdata.Histogram[float64])
	outcomes := map[string]uint64{}
	for _, dp := range wait.DataPoints {
		v, _ := dp.Attributes.Value("zklock.outcome")
		outcomes[v.AsString()] += dp.Count
	}
	assert.Equal(t, map[string]uint64{"granted": 1, "locked": 1, "unreachable": 1}, outcomes)

	queue := got["zklock.queue.length"].(metricdata.Histogram[int64])
	require.Len(t, queue.DataPoints, 1)
	assert.Equal(t, int64(3), queue.DataPoints[0].Sum)

	hold := got["zklock.hold"].(metricdata.Histogram[float64])
	var holds uint64
	for _, dp := range hold.DataPoints {
		holds += dp.Count
	}
	assert.Equal(t, uint64(2), holds)

	lost := got["zklock.leases.lost"].(metricdata.Sum[int64])
	require.Len(t, lost.DataPoints, 1)
	assert.Equal(t, int64(1), lost.DataPoints[0].Value)
	assert.True(t, lost.DataPoints[0].Attributes.HasValue("zklock.cause"))
	cause, _ := lost.DataPoints[0].Attributes.Value("zklock.cause")
	assert.Equal(t, attribute.StringValue("session_expired"), cause)

	for name, want := range map[string]int64{"zklock.cleaner.deletions": 1, "zklock.requests.retried": 2, "zklock.multilock.yields": 1} {
		sum := got[name].(metricdata.Sum[int64])
		require.Len(t, sum.DataPoints, 1, name)
		assert.Equal(t, want, sum.DataPoints[0].Value, name)
	}
}
