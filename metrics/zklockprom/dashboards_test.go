package zklockprom_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/zklock/zklock"
	zklockprom "github.com/zklock/zklock/metrics/zklockprom"
)

const (
	dashboardFile = "dashboards/zklock.json"
	alertsFile    = "dashboards/alerts.yml"
)

// Every series the Grafana dashboard and the alert rules query is one the
// adapter exports (a histogram through its _bucket, _sum or _count), every
// label they group, select or print by is one the adapter writes (or
// Prometheus adds), and every outcome, cause and kind they select is one
// the adapter reports.
func TestDashboardsQueryExportedSeries(t *testing.T) {
	exp := gatherExported(t)
	for file, read := range map[string]func([]byte) ([]query, error){dashboardFile: dashboardQueries, alertsFile: alertQueries} {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		queries, err := read(data)
		require.NoError(t, err, file)
		require.NotEmpty(t, queries, file)
		var names int
		for _, q := range queries {
			names += len(seriesName.FindAllString(q.expr, -1))
		}
		require.NotZero(t, names, "%s: no zklock series in any expression", file)
		require.Empty(t, exp.problems(queries), "%s queries what the adapter does not export", file)
	}
}

// The dashboard shows, and the rules alert on, what the issue asks for.
func TestDashboardsCover(t *testing.T) {
	data, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	queries, err := dashboardQueries(data)
	require.NoError(t, err)
	var all strings.Builder
	for _, q := range queries {
		all.WriteString(q.expr + "\n")
	}
	for _, s := range []string{
		"zklock_acquire_wait_seconds_bucket", "zklock_acquire_wait_seconds_count", "zklock_queue_length_bucket",
		"zklock_hold_seconds_bucket", "zklock_leases_lost_total", "zklock_requests_retried_total",
		"zklock_multilock_yields_total", "zklock_cleaner_deletions_total",
	} {
		require.Contains(t, all.String(), s, "the dashboard shows %s", s)
	}

	data, err = os.ReadFile(alertsFile)
	require.NoError(t, err)
	rules, err := alertQueries(data)
	require.NoError(t, err)
	byAlert := map[string]string{}
	for _, r := range rules {
		byAlert[r.where] = r.expr
	}
	for alert, want := range map[string]*regexp.Regexp{
		"ZklockLeasesLost":      regexp.MustCompile(`by \([^)]*\bcause\b[^)]*\) \(increase\(zklock_leases_lost_total\[5m\]\)\) > 0$`),
		"ZklockAcquireWaitHigh": regexp.MustCompile(`^histogram_quantile\(0\.99, .*zklock_acquire_wait_seconds_bucket`),
		"ZklockRetriesHigh":     regexp.MustCompile(`rate\(zklock_requests_retried_total\[`),
	} {
		require.Contains(t, byAlert, alert)
		require.Regexp(t, want, byAlert[alert], alert)
	}
}

// The check fails a query of a name the adapter does not export, a bare
// histogram name (not a series), a counter with a histogram's suffix, a
// label or a label value the adapter does not write.
func TestDashboardCheckCatchesStrays(t *testing.T) {
	exp := gatherExported(t)
	for _, expr := range []string{
		`rate(zklock_acquire_wait_seconds_total[5m])`,
		`zklock_hold_seconds`,
		`zklock_leases_lost_total_count`,
		`sum by (path) (rate(zklock_requests_retried_total[5m]))`,
		`rate(zklock_acquire_wait_seconds_count{outcome="granted", reason="x"}[5m])`,
		`rate(zklock_acquire_wait_seconds_count{outcome="acquired"}[5m])`,
		`increase(zklock_leases_lost_total{cause="expired"}[5m])`,
		`zklock_queue_length_count{kind="mutexes"}`,
	} {
		require.NotEmpty(t, exp.problems([]query{{where: "test", expr: expr}}), expr)
	}
	require.NotEmpty(t, exp.problems([]query{{where: "test", expr: `sum(zklock_queue_length_count)`, legend: "{{ path }}"}}))

	// And so it fails the dashboard itself with one name changed.
	data, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	changed := strings.Replace(string(data), "zklock_hold_seconds_bucket", "zklock_held_seconds_bucket", 1)
	require.NotEqual(t, string(data), changed)
	queries, err := dashboardQueries([]byte(changed))
	require.NoError(t, err)
	require.Equal(t, []string{`panel "Hold time, p50 / p99" target A: zklock_held_seconds_bucket is not a series the adapter exports`}, exp.problems(queries))
}

// query is one PromQL expression of a dashboard or a rule file, with the
// legend that prints its labels.
type query struct {
	where, expr, legend string
}

// dashboardQueries returns the expression of every target of every panel
// of a Grafana dashboard, rows' panels included, and the query of every
// templating variable that has one.
func dashboardQueries(data []byte) ([]query, error) {
	type panel struct {
		Title   string
		Targets []struct {
			RefID        string `json:"refId"`
			Expr         string `json:"expr"`
			LegendFormat string `json:"legendFormat"`
		}
		Panels []json.RawMessage
	}
	var d struct {
		Panels     []json.RawMessage
		Templating struct {
			List []struct {
				Name  string
				Type  string
				Query any
			}
		}
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, err
	}
	var qs []query
	var walk func([]json.RawMessage) error
	walk = func(raw []json.RawMessage) error {
		for _, r := range raw {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				return err
			}
			for _, tg := range p.Targets {
				where := fmt.Sprintf("panel %q target %s", p.Title, tg.RefID)
				if strings.TrimSpace(tg.Expr) == "" {
					return fmt.Errorf("%s: no expr", where)
				}
				qs = append(qs, query{where: where, expr: tg.Expr, legend: tg.LegendFormat})
			}
			if err := walk(p.Panels); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(d.Panels); err != nil {
		return nil, err
	}
	for _, v := range d.Templating.List {
		if s, ok := v.Query.(string); ok && v.Type == "query" {
			qs = append(qs, query{where: "variable " + v.Name, expr: s})
		}
	}
	return qs, nil
}

// alertQueries returns the expression of every rule of a Prometheus rule
// file, where naming the alert (or recording rule), legend the templates of
// its annotations and labels. A field Prometheus does not know is an error.
func alertQueries(data []byte) ([]query, error) {
	var f struct {
		Groups []struct {
			Name        string
			Interval    string
			Limit       int
			QueryOffset string `yaml:"query_offset"`
			Labels      map[string]string
			Rules       []struct {
				Alert, Record, Expr string
				For                 string
				KeepFiringFor       string `yaml:"keep_firing_for"`
				Labels              map[string]string
				Annotations         map[string]string
			}
		}
	}
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	var qs []query
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			if name == "" || (r.Alert != "" && r.Record != "") || strings.TrimSpace(r.Expr) == "" {
				return nil, fmt.Errorf("group %s: a rule needs one of alert and record, and an expr", g.Name)
			}
			for _, d := range []string{r.For, r.KeepFiringFor} {
				if d != "" && !promDuration.MatchString(d) {
					return nil, fmt.Errorf("%s: %q is not a Prometheus duration", name, d)
				}
			}
			var templates []string
			for _, m := range []map[string]string{r.Labels, r.Annotations} {
				for _, v := range m {
					for _, l := range alertLabel.FindAllStringSubmatch(v, -1) {
						templates = append(templates, "{{"+l[1]+"}}")
					}
				}
			}
			qs = append(qs, query{where: name, expr: r.Expr, legend: strings.Join(templates, " ")})
		}
	}
	return qs, nil
}

// exported is what the adapter's registry gathers: the series names (a
// histogram's _bucket, _sum and _count), the label names, and the values
// each labelled series may take.
type exported struct {
	series map[string]bool
	labels map[string]bool
	values map[string][]string
}

var (
	seriesName = regexp.MustCompile(`\bzklock_[A-Za-z0-9_:]*`)
	grouping   = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	matcher    = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	legendVar  = regexp.MustCompile(`\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}`)
	alertLabel = regexp.MustCompile(`\$labels\.([A-Za-z_][A-Za-z0-9_]*)`)

	promDuration = regexp.MustCompile(`^([0-9]+(ms|s|m|h|d|w|y))+$`)
)

// gatherExported exercises the adapter once per family and gathers its
// registry.
func gatherExported(t *testing.T) exported {
	t.Helper()
	reg := prom.NewRegistry()
	m, err := zklockprom.New(reg)
	require.NoError(t, err)
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
	require.Len(t, families, 7, "every family gathered")

	exp := exported{
		series: map[string]bool{},
		// job and instance are Prometheus's target labels, le a bucket's.
		labels: map[string]bool{"job": true, "instance": true, "le": true},
		values: map[string][]string{
			// What the adapter writes (its doc comment); not all are
			// reachable without a server, so they are listed.
			"outcome": {"granted", "locked", "unreachable", "timeout", "error"},
			"cause":   {"session_expired", "node_deleted", "connection_lost"},
			"kind":    {zklock.KindMutex, zklock.KindRead, zklock.KindWrite, zklock.KindSemaphore},
		},
	}
	for _, f := range families {
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				exp.series[f.GetName()+s] = true
			}
		} else {
			exp.series[f.GetName()] = true
		}
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				exp.labels[l.GetName()] = true
			}
		}
	}
	for l := range exp.values {
		require.True(t, exp.labels[l], "the adapter writes label %s", l)
	}
	return exp
}

// problems lists what in queries the adapter does not export.
func (e exported) problems(queries []query) []string {
	var out []string
	for _, q := range queries {
		bad := func(format string, args ...any) {
			out = append(out, q.where+": "+fmt.Sprintf(format, args...))
		}
		for _, n := range seriesName.FindAllString(q.expr, -1) {
			if !e.series[n] {
				bad("%s is not a series the adapter exports", n)
			}
		}
		var labels []string
		for _, g := range grouping.FindAllStringSubmatch(q.expr, -1) {
			for l := range strings.SplitSeq(g[1], ",") {
				if l = strings.TrimSpace(l); l != "" {
					labels = append(labels, l)
				}
			}
		}
		for _, m := range matcher.FindAllStringSubmatch(q.expr, -1) {
			labels = append(labels, m[1])
			if allowed, ok := e.values[m[1]]; ok && m[2] == "=" && !slices.Contains(allowed, m[3]) {
				bad("%s=%q is not a value the adapter writes", m[1], m[3])
			}
		}
		for _, m := range legendVar.FindAllStringSubmatch(q.legend, -1) {
			labels = append(labels, m[1])
		}
		for _, l := range labels {
			if !e.labels[l] {
				bad("label %s is not one the adapter writes", l)
			}
		}
	}
	return out
}
