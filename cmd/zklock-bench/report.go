package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// median folds the repetitions of each (latency, workload, kind) into one
// cell holding the median of every figure, in first-seen order.
func median(cells []cell) []cell {
	type key struct{ latency, workload, kind string }
	var order []key
	groups := map[key][]cell{}
	for _, c := range cells {
		k := key{c.Latency, c.Workload, c.Kind}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], c)
	}
	out := make([]cell, 0, len(order))
	for _, k := range order {
		g := groups[k]
		m := g[0]
		m.Rep = len(g)
		for _, f := range figures {
			*f.of(&m) = med(g, f.of)
		}
		m.Watches = slices.Max(collect(g, func(c *cell) int64 { return c.Watches })) // the worst, not the median
		m.Cycles = int(med(g, func(c *cell) *float64 { v := float64(c.Cycles); return &v }))
		out = append(out, m)
	}
	return out
}

// figure is one column of the table.
type figure struct {
	name string
	of   func(*cell) *float64
	fmt  string
}

var figures = []figure{
	{"ops/s", func(c *cell) *float64 { return &c.OpsPerS }, "%.0f"},
	{"p50 ms", func(c *cell) *float64 { return &c.WaitP50 }, "%.2f"},
	{"p99 ms", func(c *cell) *float64 { return &c.WaitP99 }, "%.2f"},
	{"writes", func(c *cell) *float64 { return &c.Writes }, "%.2f"},
	{"reads", func(c *cell) *float64 { return &c.Reads }, "%.2f"},
	{"watch ev", func(c *cell) *float64 { return &c.WatchEv }, "%.2f"},
	{"cpu µs", func(c *cell) *float64 { return &c.CPUus }, "%.0f"},
	{"srv µs", func(c *cell) *float64 { return &c.SrvCPUus }, "%.0f"},
	{"allocs", func(c *cell) *float64 { return &c.Allocs }, "%.0f"},
	{"B in", func(c *cell) *float64 { return &c.BytesIn }, "%.0f"},
	{"B out", func(c *cell) *float64 { return &c.BytesOut }, "%.0f"},
}

func med(g []cell, of func(*cell) *float64) float64 {
	vs := collect(g, func(c *cell) float64 { return *of(c) })
	slices.Sort(vs)
	if len(vs)%2 == 1 {
		return vs[len(vs)/2]
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
}

func collect[T any](g []cell, f func(*cell) T) []T {
	out := make([]T, len(g))
	for i := range g {
		out[i] = f(&g[i])
	}
	return out
}

// printTable writes the medians as one table per latency, with zklock's
// ops/s and client CPU as ratios to zk.Lock and to the floor.
func printTable(w io.Writer, cells []cell) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.AlignRight)
	header := []string{"latency", "workload", "kind"}
	for _, f := range figures {
		header = append(header, f.name)
	}
	header = append(header, "watches left", "ops ×zk.Lock", "ops ×floor", "cpu ×zk.Lock")
	fmt.Fprintln(tw, strings.Join(header, "\t")+"\t")
	find := func(c cell, kind string) *cell {
		for i := range cells {
			if cells[i].Latency == c.Latency && cells[i].Workload == c.Workload && cells[i].Kind == kind {
				return &cells[i]
			}
		}
		return nil
	}
	for _, c := range cells {
		row := []string{c.Latency, c.Workload, c.Kind}
		for _, f := range figures {
			row = append(row, fmt.Sprintf(f.fmt, *f.of(&c)))
		}
		row = append(row, fmt.Sprint(c.Watches))
		zl, fl := find(c, kindZkLock), find(c, kindFloor)
		row = append(row, ratio(c.OpsPerS, zl, func(c *cell) float64 { return c.OpsPerS }),
			ratio(c.OpsPerS, fl, func(c *cell) float64 { return c.OpsPerS }),
			ratio(c.CPUus, zl, func(c *cell) float64 { return c.CPUus }))
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	tw.Flush()
}

func ratio(v float64, other *cell, f func(*cell) float64) string {
	if other == nil || f(other) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v/f(other))
}
