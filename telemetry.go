package zklock

import (
	"context"
	"errors"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zklock/zklock/internal/lockpath"
)

// Metrics receives what a Client observes, for a service to export (the
// module github.com/zklock/zklock/metrics/zklockprom adapts it to
// Prometheus, metrics/zklockotel to OpenTelemetry; zklock itself depends on
// no metrics library). Set it with

// The kinds Metrics reports.
const (
	KindMutex     = lockpath.KindMutex     // "mutex": Mutex, ReentrantMutex and the parts of a MultiLock
	KindRead      = lockpath.KindRead      // "read": RWMutex readers
	KindWrite     = lockpath.KindWrite     // "write": RWMutex writers
	KindSemaphore = lockpath.KindSemaphore // "semaphore"
)

// LossCause names why a lease was lost, for a metric label: "session_expired",
// "node_deleted", "connection_lost" (no word from ZooKeeper's leader for longer than
// the session can be trusted, or the connection was closed), or "" when err
// is not a loss.
func LossCause(err error) string {
	switch {
	case !errors.Is(err, ErrLockLost):
		return ""
	case isNodeDeleted(err):
		return "node_deleted"
	case errors.Is(err, zk.ErrSessionExpired):
		return "session_expired"
	}
	return "connection_lost"
}

// AcquireOutcome names how an Acquire ended, for a metric label: "granted"
// (err is nil), "locked" (TryAcquire found it held), "unreachable"
// (ZooKeeper could not be reached, deadline or not), "timeout" (ctx ended
// while others held the lock) or "error".
func AcquireOutcome(err error) string {
	switch {
	case err == nil:
		return "granted"
	case errors.Is(err, ErrLocked):
		return "locked"
	case errors.Is(err, ErrUnreachable): // before timeout: it is joined with the deadline
		return "unreachable"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "timeout"
	}
	return "error"
}

// WithMetrics sends the client's observations to m.
func WithMetrics(m Metrics) Option {
	return func(o *options) error {
		if m == nil {
			m = noMetrics{}
		}
		o.metrics = m
		return nil
	}
}

// noMetrics is the default: it observes nothing.
type noMetrics struct{}

func (noMetrics) Acquired(string, time.Duration, error) {}
func (noMetrics) Queued(string, int)                    {}
func (noMetrics) Ended(string, time.Duration, error)    {}
func (noMetrics) CleanerDeleted(string)                 {}
func (noMetrics) Retried()                              {}
func (noMetrics) MultiLockYielded([]string)             {}
