package lockservice_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// loadFigures are one phase's figures; CPU is in µs per acquisition.
type loadFigures struct {
	rate                     float64 // acquisitions/s
	rates, p50, p99          map[string]float64
	callers, service, keeper float64 // CPU per acquisition of each process
	writes, reads            float64 // ZooKeeper requests per acquisition
	cores                    float64 // CPU of the three processes per second of the phase
	machine                  float64 // CPU of every process per second (of 2 cores here)
}

func figuresOf(ph phase) loadFigures {
	secs := ph.after.at.Sub(ph.before.at).Seconds()
	f := loadFigures{rates: map[string]float64{}, p50: map[string]float64{}, p99: map[string]float64{}}
	n := 0
	for kind, ws := range ph.waits {
		slices.Sort(ws)
		n += len(ws)
		f.rates[kind] = float64(len(ws)) / secs
		f.p50[kind] = ms(ws[len(ws)/2])
		f.p99[kind] = ms(ws[len(ws)*99/100])
	}
	acq := float64(n)
	f.rate = acq / secs
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / acq }
	f.callers = per(ph.after.callers - ph.before.callers)
	f.service = per(ph.after.service - ph.before.service)
	f.keeper = per(ph.after.keeper - ph.before.keeper)
	f.cores = (f.callers + f.service + f.keeper) * f.rate / 1e6
	f.machine = (ph.after.machine - ph.before.machine).Seconds() / secs
	count := func(key string) float64 { return float64(ph.after.mntr.Int(key)-ph.before.mntr.Int(key)) / acq }
	f.writes, f.reads = count("zk_cnt_updatelatency"), count("zk_cnt_readlatency")
	return f
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// reportLoad logs every round and reports the medians over rounds.
func reportLoad(b *testing.B, rounds []loadRound, streams, leases holdCost) {
	var lib, svc []loadFigures
	for r, rd := range rounds {
		l, s := figuresOf(rd.lib), figuresOf(rd.svc)
		lib, svc = append(lib, l), append(svc, s)
		b.Logf("round %d, %d callers, %v a phase: library %s\n  service (%.2f of the library) %s",
			r+1, loadCallers, loadPhase, l.line("library"), s.rate/l.rate, s.line("stream", "lease"))
	}
	med := func(fs []loadFigures, get func(loadFigures) float64) float64 {
		v := make([]float64, len(fs))
		for i, f := range fs {
			v[i] = get(f)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	ratios := make([]loadFigures, len(lib))
	for i := range lib {
		ratios[i].rate = svc[i].rate / lib[i].rate
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(med(lib, func(f loadFigures) float64 { return f.rate }), "lib-acq/s")
	b.ReportMetric(med(svc, func(f loadFigures) float64 { return f.rate }), "svc-acq/s")
	b.ReportMetric(med(ratios, func(f loadFigures) float64 { return f.rate }), "svc/lib")
	b.ReportMetric(med(lib, func(f loadFigures) float64 { return f.callers }), "lib-cpu-µs/acq")
	b.ReportMetric(med(svc, func(f loadFigures) float64 { return f.service }), "svc-cpu-µs/acq")
	b.ReportMetric(med(svc, func(f loadFigures) float64 { return f.callers }), "http-callers-cpu-µs/acq")
	b.ReportMetric(med(lib, func(f loadFigures) float64 { return f.keeper }), "lib-zk-cpu-µs/acq")
	b.ReportMetric(med(svc, func(f loadFigures) float64 { return f.keeper }), "svc-zk-cpu-µs/acq")
	b.ReportMetric(streams.heap, "stream-heapB/holding")
	b.ReportMetric(streams.goroutines, "stream-goroutines/holding")
	b.ReportMetric(leases.heap, "lease-heapB/holding")
	b.ReportMetric(leases.goroutines, "lease-goroutines/holding")
	b.Logf("holdings, %d at once, cost to the service process each: streams %.0f B heap, %.0f B stacks, %.2f goroutines; leases (one lock each, no connection open) %.0f B heap, %.0f B stacks, %.2f goroutines",
		loadCallers, streams.heap, streams.stack, streams.goroutines, leases.heap, leases.stack, leases.goroutines)
}

// line is a phase's figures in one line, the kinds in the order given.
func (f loadFigures) line(kinds ...string) string {
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s %.0f/s wait p50 %.1f p99 %.1f ms", k, f.rates[k], f.p50[k], f.p99[k]))
	}
	return fmt.Sprintf("%.0f acquisitions/s [%s]; CPU µs per acquisition: this process %.0f, service process %.0f, ZooKeeper %.0f (cores busy: %.2f in these processes, %.2f in all); ZooKeeper writes %.2f, reads %.2f per acquisition",
		f.rate, strings.Join(parts, "; "), f.callers, f.service, f.keeper, f.cores, f.machine, f.writes, f.reads)
}
