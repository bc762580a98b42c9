// Package zklockprom exports what a zklock Client observes (zklock.Metrics)
// as Prometheus metrics. It is a module of its own, so zklock itself forces
// no metrics library on anyone:
//
//	m, err := zklockprom.New(prom.DefaultRegisterer)
//	...
//	c, err := zklock.Connect(ctx, servers, zklock.WithMetrics(m))
//
// Metrics (label kind: mutex, read, write or semaphore):
//
//	zklock_acquire_wait_seconds{kind,outcome}  histogram; outcome granted, locked, unreachable, timeout or error
//	zklock_queue_length{kind}                  histogram of the queue an Acquire joined, itself included
//	zklock_hold_seconds{kind}                  histogram of how long leases were held
//	zklock_leases_lost_total{kind,cause}       cause session_expired, node_deleted or connection_lost
//	zklock_cleaner_deletions_total             empty lock paths the cleaner removed
//	zklock_requests_retried_total              requests sent again after a dropped connection
//	zklock_multilock_yields_total              MultiLock attempts that let go to break a wait-for cycle
//
// Lock paths are not labels: a service may lock one path per job or per
// tenant, and each would become a time series.
package zklockprom

import (
	"time"

	prom "github.com/prometheus/client_golang/prometheus"

	"github.com/zklock/zklock"
)

// Metrics is a zklock.Metrics that records into Prometheus collectors.
type Metrics struct {
	wait    *prom.HistogramVec
	queue   *prom.HistogramVec
	hold    *prom.HistogramVec
	lost    *prom.CounterVec
	cleaned prom.Counter
	retried prom.Counter
	yields  prom.Counter
}

var _ zklock.Metrics = (*Metrics)(nil)

// New makes the collectors and registers them with reg.
func New(reg prom.Registerer) (*Metrics, error) {
	m := &Metrics{
		wait: prom.NewHistogramVec(prom.HistogramOpts{
			Name: "zklock_acquire_wait_seconds", Help: "Time from Acquire to its return, by outcome.",
			Buckets: prom.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"kind", "outcome"}),
		queue: prom.NewHistogramVec(prom.HistogramOpts{
			Name: "zklock_queue_length", Help: "Lock nodes on the path when an Acquire joined, itself included.",
			Buckets: prom.ExponentialBuckets(1, 2, 10),
		}, []string{"kind"}),
		hold: prom.NewHistogramVec(prom.HistogramOpts{
			Name: "zklock_hold_seconds", Help: "Time a lease was held, until released, lost or closed.",
			Buckets: prom.ExponentialBuckets(0.001, 4, 12),
		}, []string{"kind"}),
		lost: prom.NewCounterVec(prom.CounterOpts{
			Name: "zklock_leases_lost_total", Help: "Leases that ended without Release, by cause.",
		}, []string{"kind", "cause"}),
		cleaned: prom.NewCounter(prom.CounterOpts{
			Name: "zklock_cleaner_deletions_total", Help: "Empty lock paths the cleaner removed.",
		}),
		yields: prom.NewCounter(prom.CounterOpts{
			Name: "zklock_multilock_yields_total", Help: "MultiLock attempts that let go to break a wait-for cycle with another client.",
		}),
		retried: prom.NewCounter(prom.CounterOpts{
			Name: "zklock_requests_retried_total", Help: "Requests sent again after their connection dropped.",
		}),
	}
	for _, c := range []prom.Collector{m.wait, m.queue, m.hold, m.lost, m.cleaned, m.retried, m.yields} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Acquired implements zklock.Metrics.
func (m *Metrics) Acquired(kind string, wait time.Duration, err error) {
	m.wait.WithLabelValues(kind, zklock.AcquireOutcome(err)).Observe(wait.Seconds())
}

// Queued implements zklock.Metrics.
func (m *Metrics) Queued(kind string, length int) {
	m.queue.WithLabelValues(kind).Observe(float64(length))
}

// Ended implements zklock.Metrics.
func (m *Metrics) Ended(kind string, held time.Duration, why error) {
	m.hold.WithLabelValues(kind).Observe(held.Seconds())
	if cause := zklock.LossCause(why); cause != "" {
		m.lost.WithLabelValues(kind, cause).Inc()
	}
}

// CleanerDeleted implements zklock.Metrics.
func (m *Metrics) CleanerDeleted(string) { m.cleaned.Inc() }

// Retried implements zklock.Metrics.
func (m *Metrics) Retried() { m.retried.Inc() }

// MultiLockYielded counts a MultiLock that let go to break a wait-for cycle.
func (m *Metrics) MultiLockYielded([]string) { m.yields.Inc() }
