package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
)

// workerConfig is what the coordinator tells a worker process, as the first
// line of its stdin.
type workerConfig struct {
	Lib            string        `json:"lib"`
	MutexOnly      bool          `json:"mutex_only"`
	Addrs          []string      `json:"addrs"`
	Base           string        `json:"base"`
	Paths          int           `json:"paths"`
	First          int           `json:"first"` // global index of its first session
	Count          int           `json:"count"`
	Think          time.Duration `json:"think"`
	Hold           time.Duration `json:"hold"`
	AcquireTimeout time.Duration `json:"acquire_timeout"`
	Duration       time.Duration `json:"duration"`
	Warmup         time.Duration `json:"warmup"` // the same loop, unmeasured, before "ready"
	SessionTimeout time.Duration `json:"session_timeout"`
	ZipfS          float64       `json:"zipf_s"`
	ZipfV          float64       `json:"zipf_v"`
	ReadShare      float64       `json:"read_share"`
	Permits        int           `json:"permits"`
	Seed           uint64        `json:"seed"`
	Batch          int           `json:"batch"`
	Out            string        `json:"out"` // the records file
}

// workerMsg is a worker's report on stdout, one JSON line per phase:
// "ready" once its sessions are connected, "done" once they stopped.
type workerMsg struct {
	Phase    string `json:"phase"`
	Sessions int    `json:"sessions"`
	tally
	CPUNs      int64  `json:"cpu_ns"`    // during the measured loop
	RSS        uint64 `json:"rss_bytes"` // at the end of the loop
	HeapLive   uint64 `json:"heap_bytes"`
	ReadyRSS   uint64 `json:"ready_rss_bytes"` // once connected, before the loop
	AllocBytes uint64 `json:"alloc_bytes"`     // allocated during the loop
}

// workerBound is how long a worker may live beyond its run and its connects.
const workerBound = 5 * time.Minute

// workerMain is the process the coordinator re-executes with -worker: it
// connects its sessions, runs the loop on "go", reports, and closes the
// sessions on "quit" or when its stdin closes (the coordinator is gone).
func workerMain() int {
	if err := worker(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func worker(ctx context.Context) error {
	lines := stdinLines()
	first, ok := <-lines
	if !ok {
		return fmt.Errorf("zklock-scale: worker: no configuration on stdin")
	}
	var wc workerConfig
	if err := json.Unmarshal([]byte(first), &wc); err != nil {
		return fmt.Errorf("zklock-scale: worker: configuration: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, wc.Warmup+wc.Duration+workerBound)
	defer cancel()
	sessions, err := connectAll(ctx, wc)
	defer closeAll(sessions)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	if wc.Warmup > 0 {
		// A client guesses from its recent acquisitions (zklock's prior
		// for a path not seen yet): a fleet's clients are not new, so
		// neither are the measured ones.
		warm := wc
		warm.Duration = wc.Warmup
		runSessions(ctx, warm, sessions)
	}
	runtime.GC() // what connecting left behind is not the sessions' own
	readyRSS := processRSS()
	if err := enc.Encode(workerMsg{Phase: "ready", Sessions: len(sessions), ReadyRSS: readyRSS}); err != nil {
		return err
	}
	if err := expectLine(ctx, lines, "go"); err != nil {
		return err
	}
	msg, recs := runSessions(ctx, wc, sessions)
	msg.ReadyRSS = readyRSS
	if err := writeRecords(wc.Out, recs); err != nil {
		return err
	}
	if err := enc.Encode(msg); err != nil {
		return err
	}
	return expectLine(ctx, lines, "quit")
}

// stdinLines delivers stdin's lines; the channel closes at EOF.
func stdinLines() <-chan string {
	ch := make(chan string)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(os.Stdin)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	return ch
}

func expectLine(ctx context.Context, lines <-chan string, want string) error {
	select {
	case l, ok := <-lines:
		if !ok {
			return fmt.Errorf("zklock-scale: worker: stdin closed while waiting for %q", want)
		}
		if l != want {
			return fmt.Errorf("zklock-scale: worker: got %q, want %q", l, want)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("zklock-scale: worker: waiting for %q: %w", want, ctx.Err())
	}
}

// connectAll opens the worker's sessions, wc.Batch at a time so that a
// thousand connects do not all wait on the servers at once. Session i (its
// global index) goes to server i mod len(wc.Addrs), and to it alone.
func connectAll(ctx context.Context, wc workerConfig) ([]session, error) {
	out := make([]session, wc.Count)
	for lo := 0; lo < wc.Count; lo += wc.Batch {
		hi := min(lo+wc.Batch, wc.Count)
		errs := make([]error, hi-lo)
		var wg sync.WaitGroup
		for j := lo; j < hi; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				addr := wc.Addrs[(wc.First+j)%len(wc.Addrs)]
				out[j], errs[j-lo] = connectSession(cctx, wc, addr)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return out, fmt.Errorf("zklock-scale: worker: connecting session: %w", err)
			}
		}
	}
	return out, nil
}

func closeAll(sessions []session) {
	var wg sync.WaitGroup
	for _, s := range sessions {
		if s != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.close()
			}()
		}
	}
	wg.Wait()
}
