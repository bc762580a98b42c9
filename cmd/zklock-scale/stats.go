package main

import (
	"slices"
	"time"
)

// latencies summarises the holdings of one run, or of one kind in it.
type latencies struct {
	Kind       string  `json:"kind"` // "all", or a kind's name
	Acquired   int     `json:"acquisitions"`
	AcqPerS    float64 `json:"acq_per_s"`
	WaitP50    float64 `json:"wait_p50_ms"`
	WaitP99    float64 `json:"wait_p99_ms"`
	WaitP999   float64 `json:"wait_p999_ms"`
	Handoffs   int     `json:"handoffs"`
	HandoffP50 float64 `json:"handoff_p50_ms"`
	HandoffP99 float64 `json:"handoff_p99_ms"`
}

// summarise computes the latencies of recs over a window of d, in total and
// for every kind that occurs, in the kinds' order.
func summarise(recs []record, d time.Duration) []latencies {
	handoff := handoffs(recs)
	out := []latencies{summary("all", recs, handoff, d)}
	for k := range numKinds {
		var sub []record
		var hs []int64
		for i, r := range recs {
			if r.Kind == k {
				sub = append(sub, r)
				hs = append(hs, handoff[i])
			}
		}
		if len(sub) > 0 {
			out = append(out, summary(k.String(), sub, hs, d))
		}
	}
	return out
}

func summary(name string, recs []record, handoff []int64, d time.Duration) latencies {
	waits := make([]int64, len(recs))
	for i, r := range recs {
		waits[i] = r.Grant - r.Call
	}
	var hs []int64
	for _, h := range handoff {
		if h >= 0 {
			hs = append(hs, h)
		}
	}
	return latencies{
		Kind: name, Acquired: len(recs), AcqPerS: float64(len(recs)) / d.Seconds(),
		WaitP50: pct(waits, 0.50), WaitP99: pct(waits, 0.99), WaitP999: pct(waits, 0.999),
		Handoffs: len(hs), HandoffP50: pct(hs, 0.50), HandoffP99: pct(hs, 0.99),
	}
}

// handoffs returns, for every record (same order), the hand-off latency in
// ns of a grant that had to wait: the grant's time minus the release, on
// the same path, that came last before it, when the call came before that
// release (the caller was waiting while the path was held). It is -1 for a
// grant that did not wait. For a mutex or a writer the release is the
// previous holder's; for readers and permits it is the last one before.
func handoffs(recs []record) []int64 {
	out := make([]int64, len(recs))
	byPath := map[int32][]int64{} // the path's releases, sorted
	for _, r := range recs {
		byPath[r.Path] = append(byPath[r.Path], r.Release)
	}
	for _, rel := range byPath {
		slices.Sort(rel)
	}
	for i, r := range recs {
		out[i] = -1
		rel := byPath[r.Path]
		j, _ := slices.BinarySearch(rel, r.Grant+1) // first release after the grant
		if j > 0 && rel[j-1] > r.Call {
			out[i] = r.Grant - rel[j-1]
		}
	}
	return out
}

// pct is the q quantile of ns values, in ms (0 for none). It sorts vs.
func pct(vs []int64, q float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	slices.Sort(vs)
	i := min(int(q*float64(len(vs))), len(vs)-1)
	return float64(vs[i]) / 1e6
}
