package zklockprom_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

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
