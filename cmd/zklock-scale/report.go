package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// costRow is one row of the costs table: a figure of every run.
type costRow struct {
	label string
	of    func(r result) string
}

func f0(v float64) string { return fmt.Sprintf("%.0f", v) }
func f1(v float64) string { return fmt.Sprintf("%.1f", v) }
func f2(v float64) string { return fmt.Sprintf("%.2f", v) }

var costRows = []costRow{
	{"sessions", func(r result) string { return fmt.Sprint(r.Sessions) }},
	{"measured s", func(r result) string { return f1(r.Seconds) }},
	{"acquisitions/s", func(r result) string { return f0(r.Latencies[0].AcqPerS) }},
	{"timeouts", func(r result) string { return fmt.Sprint(r.Timeouts) }},
	{"errors", func(r result) string { return fmt.Sprint(r.Errors) }},
	{"violations", func(r result) string { return fmt.Sprint(r.Violations) }},
	{"writes/acq", func(r result) string { return f2(r.Writes) }},
	{"reads/acq (pings too)", func(r result) string { return f2(r.Reads) }},
	{"watch events/acq", func(r result) string { return f2(r.WatchEvents) }},
	{"bytes to servers/acq", func(r result) string { return f0(r.BytesIn) }},
	{"bytes from servers/acq", func(r result) string { return f0(r.BytesOut) }},
	{"watches/session (mid-run)", func(r result) string { return f2(r.WatchesPerSession) }},
	{"client CPU µs/acq", func(r result) string { return f0(r.ClientCPUus) }},
	{"client CPU ms/s per session", func(r result) string { return f2(r.ClientCPUmsPerS) }},
	{"client RSS KB/session", func(r result) string { return f0(r.ClientRSSKB) }},
	{"client heap KB/session", func(r result) string { return f0(r.ClientHeapKB) }},
	{"server CPU µs/acq (all JVMs)", func(r result) string { return f0(r.ServerCPUus) }},
	{"server CPU cores (all JVMs)", func(r result) string { return f2(r.ServerCores) }},
	{"server RSS MB (all JVMs, end)", func(r result) string { return f0(r.ServerRSSMB) }},
}

// printReport writes the latency table (a row per run and kind) and the
// costs table (a row per figure, a column per run).
func printReport(w io.Writer, cfg config, rs []result) {
	fmt.Fprintf(w, "zklock-scale: %d voters + %d observer (forceSync on), %d sessions in %d processes, each on one server, round-robin;\n",
		cfg.voters, cfg.observers, cfg.sessions, cfg.procs)
	fmt.Fprintf(w, "%d paths, Zipf s=%g v=%g; think %v (exponential), hold %v, acquire timeout %v; wait = call to grant\n\n",
		cfg.paths, cfg.zipfS, cfg.zipfV, cfg.think, cfg.hold, cfg.acquireTimeout)
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tlib\tkind\tacquisitions\tacq/s\twait p50 ms\tp99 ms\tp99.9 ms\thand-offs\thand-off p50 ms\tp99 ms\t")
	for _, r := range rs {
		for i, l := range r.Latencies {
			if i > 0 && len(r.Latencies) == 2 {
				break // one kind only: its row is the total's
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.0f\t%.2f\t%.2f\t%.2f\t%d\t%.2f\t%.2f\t\n", r.Name, r.Lib, l.Kind,
				l.Acquired, l.AcqPerS, l.WaitP50, l.WaitP99, l.WaitP999, l.Handoffs, l.HandoffP50, l.HandoffP99)
		}
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.AlignRight)
	head := []string{"costs"}
	for _, r := range rs {
		head = append(head, r.Name+" "+r.Lib)
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, row := range costRows {
		cells := []string{row.label}
		for _, r := range rs {
			cells = append(cells, row.of(r))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	tw.Flush()
}

// writeJSON prints one JSON object per run.
func writeJSON(w io.Writer, rs []result) error {
	enc := json.NewEncoder(w)
	for _, r := range rs {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}
