package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
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
	{"client RSS KB/session, connected", func(r result) string { return f0(r.ClientReadyRSSKB) }},
	{"client bytes allocated/acq", func(r result) string { return f0(r.ClientAllocB) }},
	{"server CPU µs/acq (all JVMs)", func(r result) string { return f0(r.ServerCPUus) }},
	{"server CPU cores (all JVMs)", func(r result) string { return f2(r.ServerCores) }},
	{"server RSS MB (all JVMs, end)", func(r result) string { return f0(r.ServerRSSMB) }},
}

// printReport writes the latency table (a row per run and kind) and the
// costs table (a row per figure, a column per run).
func printReport(w io.Writer, cfg config, rs []result) {
	fmt.Fprintf(w, "zklock-scale: %d voters + %d observer (forceSync on), %d sessions in %d processes, each on one server, round-robin;\n",
		cfg.voters, cfg.observers, cfg.sessions, cfg.procs)
	fmt.Fprintf(w, "%d paths, Zipf s=%g v=%g; think %v (exponential), hold %v, acquire timeout %v; wait = call to grant;\n",
		cfg.paths, cfg.zipfS, cfg.zipfV, cfg.think, cfg.hold, cfg.acquireTimeout)
	fmt.Fprintf(w, "each run after a warm-up of %v (the same loop, unmeasured); %s is zklock with WithOwnNodeWatch(false)\n\n", cfg.warmup, libZklockNoOwn)
	sweep := slices.DeleteFunc(slices.Clone(rs), func(r result) bool { return r.Offered == 0 })
	rs = slices.DeleteFunc(slices.Clone(rs), func(r result) bool { return r.Offered > 0 })
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
	printErrors(w, append(rs, sweep...))
	if len(sweep) > 0 {
		fmt.Fprintln(w)
		printSweep(w, cfg, sweep)
	}
}

// printErrors names the first error of every run that had any.
func printErrors(w io.Writer, rs []result) {
	for _, r := range rs {
		if r.Errors == 0 {
			continue
		}
		name := r.Name + " " + r.Lib
		if r.Offered > 0 {
			name += fmt.Sprintf(" at %g/s", r.Offered)
		}
		fmt.Fprintf(w, "%s: %d errors, the first: %s\n", name, r.Errors, r.FirstError)
	}
}

// printSweep writes the knee sweep: a row per load and library, then each
// library's knee.
func printSweep(w io.Writer, cfg config, rs []result) {
	fmt.Fprintf(w, "knee sweep: mutexes only, %v a load and library, think = sessions / load - hold\n", cfg.sweepDuration)
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "offered/s\tlib\tacq/s\twait p50 ms\tp99 ms\tp99.9 ms\ttimeouts\treads/acq\twatch events/acq\tclient CPU µs/acq\t")
	for _, r := range rs {
		l := r.Latencies[0]
		fmt.Fprintf(tw, "%g\t%s\t%.0f\t%.2f\t%.2f\t%.2f\t%d\t%.2f\t%.2f\t%.0f\t\n", r.Offered, r.Lib,
			l.AcqPerS, l.WaitP50, l.WaitP99, l.WaitP999, r.Timeouts, r.Reads, r.WatchEvents, r.ClientCPUus)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nknee (the highest load served with wait p99 <= %v and no timeout):\n", cfg.kneeP99)
	tw = tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.AlignRight)
	for _, lib := range sweepLibs {
		k, ok := knee(rs, lib, cfg.kneeP99)
		switch {
		case !ok:
			fmt.Fprintf(tw, "%s\tnone of the loads\t\n", lib)
		case k.Offered == slices.MaxFunc(rs, func(a, b result) int { return cmp.Compare(a.Offered, b.Offered) }).Offered:
			fmt.Fprintf(tw, "%s\t%.0f/s (offered %g/s: the highest load swept; the knee is beyond)\t\n", lib, k.Latencies[0].AcqPerS, k.Offered)
		default:
			fmt.Fprintf(tw, "%s\t%.0f/s (offered %g/s)\t\n", lib, k.Latencies[0].AcqPerS, k.Offered)
		}
	}
	tw.Flush()
}

// knee is lib's run that served the most acquisitions a second with a p99
// wait within bound and no timeout.
func knee(rs []result, lib string, bound time.Duration) (result, bool) {
	var best result
	found := false
	for _, r := range rs {
		l := r.Latencies[0]
		if r.Lib != lib || r.Timeouts > 0 || l.WaitP99 > float64(bound)/float64(time.Millisecond) {
			continue
		}
		if !found || l.AcqPerS > best.Latencies[0].AcqPerS {
			best, found = r, true
		}
	}
	return best, found
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
