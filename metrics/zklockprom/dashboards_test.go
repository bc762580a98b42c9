package zklockprom_test

import (
	"errors"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	zklockprom "github.com/zklock/zklock/metrics/zklockprom"
)

// seriesName is a zklock series as a query names it.
var seriesName = regexp.MustCompile(`\bzklock_[a-z_]+\b`)

// Every series the Grafana dashboard and the alert rules query is one the
// adapter exports (a histogram's _bucket, _sum and _count included), and
// every outcome and cause they select on is one the adapter writes.
func TestDashboardsQueryExportedSeries(t *testing.T) {
	reg := prom.NewRegistry()
	m, err := zklockprom.New(reg)
	require.NoError(t, err)
	// One observation of each kind, so that every family is gathered.
	m.Acquired(zklock.KindMutex, time.Millisecond, nil)
	m.Acquired(zklock.KindMutex, time.Millisecond, errors.Join(zklock.ErrUnreachable))
	m.Queued(zklock.KindMutex, 1)
	m.Ended(zklock.KindMutex, time.Millisecond, zklock.ErrReleased)
	m.Ended(zklock.KindMutex, time.Millisecond, zklock.ErrLockLost)
	m.CleanerDeleted("/p")
	m.Retried()
	m.MultiLockYielded(nil)
	families, err := reg.Gather()
	require.NoError(t, err)
	exported := map[string]bool{}
	for _, f := range families {
		exported[f.GetName()] = true
	}

	for _, file := range []string{"dashboards/zklock.json", "dashboards/alerts.yml"} {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		names := seriesName.FindAllString(string(data), -1)
		require.NotEmpty(t, names, file)
		var missing []string
		for _, n := range names {
			base := n
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(n, suffix); ok && exported[b] {
					base = b
				}
			}
			if !exported[base] {
				missing = append(missing, n)
			}
		}
		sort.Strings(missing)
		require.Empty(t, missing, "%s queries series the adapter does not export", file)
		for _, label := range regexp.MustCompile(`outcome="([a-z]+)"`).FindAllStringSubmatch(string(data), -1) {
			require.Contains(t, []string{"granted", "locked", "unreachable", "timeout", "error"}, label[1], file)
		}
	}
	require.Len(t, exported, 7, "every family gathered")
}
