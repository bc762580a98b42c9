package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zklock/zklock/internal/benchkit"
)

// A hand-off on one path cannot be faster than one commit (the holder's
// delete, fsynced) plus one notification: 1 / the floor's commit time bounds
// the hand-offs per second of any lock, and B W=2 (every release a hand-off)
// is measured against it, in each env of the same run.

// commitSample is one measure of the floor's commit time in one env.
type commitSample struct {
	latency string
	ms      float64
}

// handoffLimit is the hand-off limit in one env, and how near B W=2 comes.
type handoffLimit struct {
	Latency  string      `json:"latency"`
	CommitMs float64     `json:"floor_commit_ms"` // median round trip of one write
	PerS     float64     `json:"handoff_limit_per_s"`
	BW2      []kindShare `json:"b_w2_of_limit,omitempty"`
}

// kindShare is one kind's B W=2 ops/s as a fraction of the limit.
type kindShare struct {
	Kind  string  `json:"kind"`
	Share float64 `json:"share"`
}

// commitTime is the floor's commit time: one session creating and deleting a
// plain node, one write at a time, for d; the median round trip of a write.
func (e *env) commitTime(ctx context.Context, d time.Duration) (float64, error) {
	conn, err := benchkit.RawConn(ctx, e.dial, sessionTimeout)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if err := benchkit.EnsurePath(conn, "/bench"); err != nil {
		return 0, err
	}
	path := fmt.Sprintf("/bench/commit-%d", e.seq.Add(1))
	var rtts []time.Duration
	for stop := time.Now().Add(d); time.Now().Before(stop); {
		t0 := time.Now()
		if _, err := conn.Create(path, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			return 0, err
		}
		t1 := time.Now()
		if err := conn.Delete(path, -1); err != nil {
			return 0, err
		}
		rtts = append(rtts, t1.Sub(t0), time.Since(t1))
	}
	slices.Sort(rtts)
	return ms(rtts[len(rtts)/2]), nil
}

// handoffLimits folds the commit samples into one limit per latency (their
// median), in first-seen order, with the lock kinds' B W=2 from the medians.
func handoffLimits(samples []commitSample, medians []cell) []handoffLimit {
	var out []handoffLimit
	byLatency := map[string][]float64{}
	for _, s := range samples {
		if _, ok := byLatency[s.latency]; !ok {
			out = append(out, handoffLimit{Latency: s.latency})
		}
		byLatency[s.latency] = append(byLatency[s.latency], s.ms)
	}
	for i := range out {
		l := &out[i]
		vs := byLatency[l.Latency]
		slices.Sort(vs)
		l.CommitMs = vs[len(vs)/2]
		if len(vs)%2 == 0 {
			l.CommitMs = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
		}
		l.PerS = 1000 / l.CommitMs
		for _, c := range medians {
			if c.Latency == l.Latency && c.Workload == "B W=2" && isLock(c.Kind) {
				l.BW2 = append(l.BW2, kindShare{c.Kind, c.OpsPerS / l.PerS})
			}
		}
	}
	return out
}

func (l handoffLimit) String() string {
	s := fmt.Sprintf("latency %s: hand-off limit (1 / floor commit time %.2f ms): %.0f/s", l.Latency, l.CommitMs, l.PerS)
	if len(l.BW2) == 0 {
		return s
	}
	shares := make([]string, len(l.BW2))
	for i, k := range l.BW2 {
		shares[i] = fmt.Sprintf("%s %.2f", k.Kind, k.Share)
	}
	return s + "; B W=2: " + strings.Join(shares, ", ") + " of it"
}
