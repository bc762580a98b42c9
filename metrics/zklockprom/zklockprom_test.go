package zklockprom_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	zklockprom "github.com/zklock/zklock/metrics/zklockprom"
	"github.com/zklock/zklock/zktest"
)

var servers []string

func TestMain(m *testing.M) {
	cluster, stop, err := zktest.StartMain()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	servers = cluster.Addrs()
	code := m.Run()
	stop()
	os.Exit(code)
}

// A client wired to the adapter, a grant, a refused TryAcquire, a release
// and a loss: the scrape shows each, with exact counts.
func TestExposesZklockMetrics(t *testing.T) {
	reg := prom.NewRegistry()
	m, err := zklockprom.New(reg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := zklock.Connect(ctx, servers, zklock.WithMetrics(m), zklock.WithSessionTimeout(4*time.Second))
	require.NoError(t, err)
	defer c.Close()
	mu, err := c.NewMutex("/prom-test/lock")
	require.NoError(t, err)
	l, err := mu.Acquire(ctx)
	require.NoError(t, err)
	_, err = mu.TryAcquire(ctx)
	require.ErrorIs(t, err, zklock.ErrLocked)
	require.NoError(t, l.Release(ctx))

	obs := zktest.Connect(t, servers, 4*time.Second).Conn
	l, err = mu.Acquire(ctx)
	require.NoError(t, err)
	_, err = l.Token(ctx) // the own-node watch is set
	require.NoError(t, err)
	require.NoError(t, obs.Delete(l.Node(), -1))
	<-l.Done()

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	text := string(body)
	for _, line := range []string{
		`zklock_acquire_wait_seconds_count{kind="mutex",outcome="granted"} 2`,
		`zklock_acquire_wait_seconds_count{kind="mutex",outcome="locked"} 1`,
		`zklock_queue_length_count{kind="mutex"} 3`,
		`zklock_hold_seconds_count{kind="mutex"} 2`,
		`zklock_leases_lost_total{cause="node_deleted",kind="mutex"} 1`,
		`zklock_requests_retried_total 0`,
	} {
		assert.True(t, strings.Contains(text, line), "missing %q in:\n%s", line, text)
	}
}

func TestRegistersOnce(t *testing.T) {
	reg := prom.NewRegistry()
	_, err := zklockprom.New(reg)
	require.NoError(t, err)
	_, err = zklockprom.New(reg)
	require.Error(t, err, "a second registration is refused, not doubled")
}

// Every outcome and cause lands under its label with the exact value; no
// server needed.
func TestOutcomesAndCauses(t *testing.T) {
	reg := prom.NewRegistry()
	m, err := zklockprom.New(reg)
	require.NoError(t, err)
	m.Acquired(zklock.KindMutex, 250*time.Millisecond, nil)
	m.Acquired(zklock.KindMutex, time.Second, fmt.Errorf("x: %w", zklock.ErrLocked))
	m.Acquired(zklock.KindMutex, 125*time.Millisecond, fmt.Errorf("acquire: %w", context.DeadlineExceeded))
	m.Acquired(zklock.KindWrite, 3*time.Second, context.Canceled)
	m.Acquired(zklock.KindMutex, time.Millisecond, errors.New("zk: not authenticated"))
	m.Acquired(zklock.KindSemaphore, 2*time.Second, fmt.Errorf("%w: %w", zklock.ErrUnreachable, context.DeadlineExceeded))
	m.Queued(zklock.KindSemaphore, 5)
	m.Ended(zklock.KindRead, time.Second, fmt.Errorf("%w: %w", zklock.ErrLockLost, zk.ErrSessionExpired))
	m.Ended(zklock.KindWrite, 2*time.Second, zklock.ErrLockLost)
	m.Ended(zklock.KindMutex, time.Second, zklock.ErrClosed)
	m.CleanerDeleted("/p")
	m.Retried()
	m.Retried()
	m.MultiLockYielded([]string{"/a", "/b"})

	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{} // name{label=value,...} → sum or value
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			var labels []string
			for _, l := range mt.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			key := f.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch {
			case mt.GetHistogram() != nil:
				got[key+" count"] = float64(mt.GetHistogram().GetSampleCount())
				got[key+" sum"] = mt.GetHistogram().GetSampleSum()
			default:
				got[key] = mt.GetCounter().GetValue()
			}
		}
	}
	assert.Equal(t, map[string]float64{
		"zklock_acquire_wait_seconds{kind=mutex,outcome=granted} count":         1,
		"zklock_acquire_wait_seconds{kind=mutex,outcome=granted} sum":           0.25,
		"zklock_acquire_wait_seconds{kind=mutex,outcome=locked} count":          1,
		"zklock_acquire_wait_seconds{kind=mutex,outcome=locked} sum":            1,
		"zklock_acquire_wait_seconds{kind=mutex,outcome=timeout} count":         1,
		"zklock_acquire_wait_seconds{kind=mutex,outcome=timeout} sum":           0.125,
		"zklock_acquire_wait_seconds{kind=write,outcome=timeout} count":         1,
		"zklock_acquire_wait_seconds{kind=write,outcome=timeout} sum":           3,
		"zklock_acquire_wait_seconds{kind=mutex,outcome=error} count":           1,
		"zklock_acquire_wait_seconds{kind=mutex,outcome=error} sum":             0.001,
		"zklock_acquire_wait_seconds{kind=semaphore,outcome=unreachable} count": 1,
		"zklock_acquire_wait_seconds{kind=semaphore,outcome=unreachable} sum":   2,
		"zklock_queue_length{kind=semaphore} count":                             1,
		"zklock_queue_length{kind=semaphore} sum":                               5,
		"zklock_hold_seconds{kind=read} count":                                  1,
		"zklock_hold_seconds{kind=read} sum":                                    1,
		"zklock_hold_seconds{kind=write} count":                                 1,
		"zklock_hold_seconds{kind=write} sum":                                   2,
		"zklock_hold_seconds{kind=mutex} count":                                 1,
		"zklock_hold_seconds{kind=mutex} sum":                                   1,
		"zklock_leases_lost_total{cause=session_expired,kind=read}":             1,
		"zklock_leases_lost_total{cause=connection_lost,kind=write}":            1,
		"zklock_cleaner_deletions_total{}":                                      1,
		"zklock_requests_retried_total{}":                                       2,
		"zklock_multilock_yields_total{}":                                       1,
	}, got)
}
