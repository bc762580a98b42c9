package zklock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// An outage that begins while a waiter waits is an outage, not contention:
// the deadline that passes during it matches ErrUnreachable (and still
// context.DeadlineExceeded), the metrics outcome is "unreachable", and the
// waiter's node is gone once ZooKeeper is back.

// outcomes is a Metrics that keeps the AcquireOutcome of every Acquire.
type outcomes struct {
	recorder
	mu   sync.Mutex
	seen []string
}

func (o *outcomes) Acquired(_ string, _ time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen = append(o.seen, zklock.AcquireOutcome(err))
}

func (o *outcomes) last() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.seen) == 0 {
		return ""
	}
	return o.seen[len(o.seen)-1]
}

// waitThroughOutage queues a waiter of c behind a holder on p (obs sees the
// tree), runs outage once it is queued, and returns the waiter's node name
// and error. The deadline must leave time to queue on a loaded machine and
// for the outage to begin.
func waitThroughOutage(t *testing.T, c *zklock.Client, obs *zk.Conn, p string, deadline time.Duration, outage func()) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		l, err := mustMutex(t, c, p).Acquire(ctx)
		if l != nil {
			_ = l.Release(context.Background())
		}
		errc <- err
	}()
	waitChildren(t, obs, p, 2)
	node := lockChildren(t, obs, p)[1] // the later sequence: the waiter's
	outage()
	require.NoError(t, ctx.Err(), "the waiter's deadline passed before the outage began")
	return node, <-errc
}

// assertOutage checks the error and the metrics outcome of a waiter whose
// deadline passed during an outage.
func assertOutage(t *testing.T, err error, rec *outcomes) {
	t.Helper()
	t.Logf("waiter: %v", err)
	require.ErrorIs(t, err, zklock.ErrUnreachable)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, zklock.ErrLocked)
	require.Equal(t, "unreachable", rec.last(), "metrics outcome")
}

// requireNodeGone waits until node is no longer under p.
func requireNodeGone(t *testing.T, obs *zk.Conn, p, node string) {
	t.Helper()
	waitGone(t, obs, p+"/"+node)
}

// The connection is reset and new ones refused (a partition that the
// client sees at once).
func TestOutageMidWaitCutAndRefused(t *testing.T) {
	t.Parallel()
	p, obs, _, _ := holding(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	rec := &outcomes{}
	c := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(8*time.Second), zklock.WithMetrics(rec))
	node, err := waitThroughOutage(t, c, obs, p, 3*time.Second, func() {
		proxy.Block(true)
		proxy.Cut()
	})
	assertOutage(t, err, rec)
	proxy.Block(false)
	requireNodeGone(t, obs, p, node)
	require.Len(t, lockChildren(t, obs, p), 1, "only the holder's node is left")
}

// The connection stalls (bytes held, nothing closed): the client hears
// nothing for more than half the session timeout before the deadline.
func TestOutageMidWaitStalled(t *testing.T) {
	t.Parallel()
	p, obs, _, _ := holding(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	rec := &outcomes{}
	c := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(time.Second), zklock.WithMetrics(rec))
	node, err := waitThroughOutage(t, c, obs, p, 3*time.Second, proxy.Stall)
	assertOutage(t, err, rec)
	proxy.Resume()
	requireNodeGone(t, obs, p, node)
}

// The server stops (a private one: the shared server serves other tests).
func TestOutageMidWaitServerStopped(t *testing.T) {
	t.Parallel()
	zc := zktest.Start(t)
	zc.SkipIfExternal(t)
	obs := zktest.Connect(t, zc.Addrs(), testSession).Conn
	p := lockPath(t)
	holder := connectVia(t, zc.Addrs(), zklock.WithSessionTimeout(8*time.Second))
	_, err := mustMutex(t, holder, p).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	rec := &outcomes{}
	c := connectVia(t, zc.Addrs(), zklock.WithSessionTimeout(8*time.Second), zklock.WithMetrics(rec))
	srv := zc.Servers()[0]
	node, err := waitThroughOutage(t, c, obs, p, 6*time.Second, func() { require.NoError(t, srv.Stop()) })
	assertOutage(t, err, rec)
	require.NoError(t, srv.Restart(ctxTimeout(t, 60*time.Second)))
	requireNodeGone(t, obs, p, node)
}

// The other side: with ZooKeeper answering, a deadline behind a holder is
// contention, never an outage.
func TestOutageNoneDeadlineIsContention(t *testing.T) {
	t.Parallel()
	p, _, _, _ := holding(t)
	rec := &outcomes{}
	c := connect(t, zklock.WithMetrics(rec))
	_, err := mustMutex(t, c, p).Acquire(ctxTimeout(t, 500*time.Millisecond))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, zklock.ErrUnreachable)
	require.Equal(t, "timeout", rec.last(), "metrics outcome")
}
