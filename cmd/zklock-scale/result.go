package main

import (
	"time"
)

// result is one run's figures: per primitive where they differ, per
// acquisition or per session where they are costs.
type result struct {
	runSpec
	Sessions  int         `json:"sessions"`
	Procs     int         `json:"processes"`
	Seconds   float64     `json:"seconds"`
	Latencies []latencies `json:"latencies"`
	tally
	Violations     int    `json:"violations"`
	FirstViolation string `json:"first_violation,omitempty"`

	Writes      float64 `json:"writes_per_acq"`
	Reads       float64 `json:"reads_per_acq"` // pings of idle sessions included
	WatchEvents float64 `json:"watch_events_per_acq"`
	BytesIn     float64 `json:"bytes_to_servers_per_acq"`
	BytesOut    float64 `json:"bytes_from_servers_per_acq"`
	WritesTotal int64   `json:"writes"`

	WatchesPerSession float64 `json:"watches_per_session"`
	ClientCPUus       float64 `json:"client_cpu_us_per_acq"`
	ClientCPUmsPerS   float64 `json:"client_cpu_ms_per_s_per_session"`
	ClientRSSKB       float64 `json:"client_rss_kb_per_session"`
	ClientHeapKB      float64 `json:"client_heap_kb_per_session"`
	ClientReadyRSSKB  float64 `json:"client_ready_rss_kb_per_session"` // connected, before the loop
	ClientAllocB      float64 `json:"client_alloc_bytes_per_acq"`
	ServerCPUus       float64 `json:"server_cpu_us_per_acq"`
	ServerCores       float64 `json:"server_cpu_cores"`
	ServerRSSMB       float64 `json:"server_rss_mb"`
}

// derive computes a run's figures from what it measured; permits is the
// semaphores' N, for the exclusion check.
func derive(m measured, permits int) result {
	window := m.after.at.Sub(m.before.at)
	r := result{runSpec: m.spec, Sessions: m.sessions, Procs: len(m.procs), Seconds: window.Seconds()}
	r.Latencies = summarise(m.recs, window)
	var cpu time.Duration
	var rss, heap, ready, alloc uint64
	for _, p := range m.procs {
		r.add(p.tally)
		cpu += time.Duration(p.CPUNs)
		rss += p.RSS
		heap += p.HeapLive
		ready += p.ReadyRSS
		alloc += p.AllocBytes
	}
	v := checkExclusion(m.recs, permits)
	r.Violations = len(v)
	if len(v) > 0 {
		r.FirstViolation = v[0].String()
	}
	n := float64(max(len(m.recs), 1))
	per := func(key string) float64 { return float64(delta(m.before, m.after, key)) / n }
	r.WritesTotal = delta(m.before, m.after, "zk_cnt_updatelatency")
	r.Writes, r.Reads = per("zk_cnt_updatelatency"), per("zk_cnt_readlatency")
	r.WatchEvents = float64(watchEvents(m.before, m.after)) / n
	r.BytesIn, r.BytesOut = per("zk_bytes_received_count"), per("zk_response_bytes")
	s := float64(max(m.sessions, 1))
	r.WatchesPerSession = float64(m.watches) / s
	r.ClientCPUus = float64(cpu.Microseconds()) / n
	r.ClientCPUmsPerS = float64(cpu.Microseconds()) / 1000 / window.Seconds() / s
	r.ClientRSSKB, r.ClientHeapKB = float64(rss)/1024/s, float64(heap)/1024/s
	r.ClientReadyRSSKB, r.ClientAllocB = float64(ready)/1024/s, float64(alloc)/n
	srvCPU := m.after.totalCPU() - m.before.totalCPU()
	r.ServerCPUus = float64(srvCPU.Microseconds()) / n
	r.ServerCores = srvCPU.Seconds() / window.Seconds()
	r.ServerRSSMB = float64(m.after.totalRSS()) / (1 << 20)
	return r
}

// expectedWrites is what the run's acquisitions must have written: 2 for a
// mutex, read or write lock (create, delete), 4 for a semaphore permit (its
// turnstile's and its lease's), since the paths exist before the run.
func (r result) expectedWrites() int64 {
	var n int64
	for _, l := range r.Latencies {
		switch l.Kind {
		case kindMutex.String(), kindRead.String(), kindWrite.String():
			n += 2 * int64(l.Acquired)
		case kindPermit.String():
			n += 4 * int64(l.Acquired)
		}
	}
	return n
}
