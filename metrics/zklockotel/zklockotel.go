// Package zklockotel records what a zklock Client observes (zklock.Metrics)
// with OpenTelemetry instruments. It is a module of its own, so zklock
// itself forces no metrics library on anyone:
//
//	m, err := zklockotel.New(otel.Meter("github.com/zklock/zklock"))
//	...
//	c, err := zklock.Connect(ctx, servers, zklock.WithMetrics(m))
//
// Instruments (attribute zklock.kind: mutex, read, write or semaphore), the
// same observations as the Prometheus adapter's series:
//
//	zklock.acquire.wait       histogram, s; zklock.outcome granted, locked, unreachable, timeout or error
//	zklock.queue.length       histogram of the queue an Acquire joined, itself included
//	zklock.hold               histogram, s, of how long leases were held
//	zklock.leases.lost        counter; zklock.cause session_expired, node_deleted or connection_lost
//	zklock.cleaner.deletions  counter of empty lock paths the cleaner removed
//	zklock.requests.retried   counter of requests sent again after a dropped connection
//	zklock.multilock.yields   counter of MultiLock attempts that let go to break a wait-for cycle
//
// The histograms advise the Prometheus adapter's bucket boundaries: waits
// from 0.5ms by ×4 to about 2 minutes, queue lengths from 1 by ×2 to 512,
// holds from 1ms by ×4 to about 70 minutes (an SDK's default boundaries, 0, 5,
// 10, 25 and on, suit milliseconds, not seconds). A View in the MeterProvider
// overrides them.
//
// Lock paths are not attributes: one path per job would be one series per job.
package zklockotel

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/zklock/zklock"
)

// The histograms' bucket boundaries, the Prometheus adapter's.
var (
	waitBuckets  = exponential(0.0005, 4, 10)
	queueBuckets = exponential(1, 2, 10)
	holdBuckets  = exponential(0.001, 4, 12)
)

// exponential is prometheus.ExponentialBuckets.
func exponential(start, factor float64, n int) []float64 {
	b := make([]float64, n)
	for i := range b {
		b[i] = start
		start *= factor
	}
	return b
}

// Metrics is a zklock.Metrics that records into OpenTelemetry instruments.
type Metrics struct {
	wait    metric.Float64Histogram
	queue   metric.Int64Histogram
	hold    metric.Float64Histogram
	lost    metric.Int64Counter
	cleaned metric.Int64Counter
	retried metric.Int64Counter
	yields  metric.Int64Counter
}

var _ zklock.Metrics = (*Metrics)(nil)

// New makes the instruments with meter.
func New(meter metric.Meter) (*Metrics, error) {
	m := &Metrics{}
	var errs [7]error
	m.wait, errs[0] = meter.Float64Histogram("zklock.acquire.wait", metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(waitBuckets...),
		metric.WithDescription("Time from Acquire to its return, by outcome."))
	m.queue, errs[1] = meter.Int64Histogram("zklock.queue.length", metric.WithUnit("{node}"),
		metric.WithExplicitBucketBoundaries(queueBuckets...),
		metric.WithDescription("Lock nodes on the path when an Acquire joined, itself included."))
	m.hold, errs[2] = meter.Float64Histogram("zklock.hold", metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(holdBuckets...),
		metric.WithDescription("Time a lease was held, until released, lost or closed."))
	m.lost, errs[3] = meter.Int64Counter("zklock.leases.lost", metric.WithUnit("{lease}"),
		metric.WithDescription("Leases that ended without Release, by cause."))
	m.cleaned, errs[4] = meter.Int64Counter("zklock.cleaner.deletions", metric.WithUnit("{path}"),
		metric.WithDescription("Empty lock paths the cleaner removed."))
	m.retried, errs[5] = meter.Int64Counter("zklock.requests.retried", metric.WithUnit("{request}"),
		metric.WithDescription("Requests sent again after their connection dropped."))
	m.yields, errs[6] = meter.Int64Counter("zklock.multilock.yields", metric.WithUnit("{attempt}"),
		metric.WithDescription("MultiLock attempts that let go to break a wait-for cycle with another client."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return m, nil
}

func kind(k string) attribute.KeyValue { return attribute.String("zklock.kind", k) }

// Acquired implements zklock.Metrics.
func (m *Metrics) Acquired(k string, wait time.Duration, err error) {
	m.wait.Record(context.Background(), wait.Seconds(),
		metric.WithAttributes(kind(k), attribute.String("zklock.outcome", zklock.AcquireOutcome(err))))
}

// Queued implements zklock.Metrics.
func (m *Metrics) Queued(k string, length int) {
	m.queue.Record(context.Background(), int64(length), metric.WithAttributes(kind(k)))
}

// Ended implements zklock.Metrics.
func (m *Metrics) Ended(k string, held time.Duration, why error) {
	m.hold.Record(context.Background(), held.Seconds(), metric.WithAttributes(kind(k)))
	if cause := zklock.LossCause(why); cause != "" {
		m.lost.Add(context.Background(), 1, metric.WithAttributes(kind(k), attribute.String("zklock.cause", cause)))
	}
}

// CleanerDeleted implements zklock.Metrics.
func (m *Metrics) CleanerDeleted(string) { m.cleaned.Add(context.Background(), 1) }

// Retried implements zklock.Metrics.
func (m *Metrics) Retried() { m.retried.Add(context.Background(), 1) }

// MultiLockYielded implements zklock.Metrics.
func (m *Metrics) MultiLockYielded([]string) { m.yields.Add(context.Background(), 1) }
