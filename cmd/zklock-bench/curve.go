package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/internal/benchkit"
)

// costCurve is how the cost of the recipe grows: with the queue length on one
// path, and with the number of leases one client holds; and what a waiting
// Acquire and an idle lease weigh.
type costCurve struct {
	Queue  []queuePoint `json:"queue"`
	Held   []heldPoint  `json:"held"`
	Waiter footprint    `json:"waiter"`
	Growth *heapGrowth  `json:"heap_growth,omitempty"`
}

// queuePoint is one hand-off's cost with W workers queued on one path.
type queuePoint struct {
	W       int     `json:"w"`
	Kind    string  `json:"kind"`
	HandOff float64 `json:"handoff_ms"` // 1/throughput
	Reqs    float64 `json:"requests"`
	Bytes   float64 `json:"bytes"` // to the server and back
	CPUus   float64 `json:"client_cpu_us"`
}

// heldPoint is what K held leases cost one client: per lease at rest, and
// for one more acquire/release cycle on another path.
type heldPoint struct {
	K          int     `json:"k"`
	HeapPer    float64 `json:"heap_bytes_per_lease"`
	GoPer      float64 `json:"goroutines_per_lease"`
	IdleCPU    float64 `json:"idle_cpu_ms_per_s"` // the whole process, at rest
	CycleCPUus float64 `json:"cycle_client_cpu_us"`
	CycleMs    float64 `json:"cycle_ms"`
}

type footprint struct {
	N       int     `json:"n"`
	HeapPer float64 `json:"heap_bytes_per_waiter"`
	GoPer   float64 `json:"goroutines_per_waiter"`
}

type heapGrowth struct {
	After1k   uint64 `json:"heap_after_1k"`
	After100k uint64 `json:"heap_after_100k"`
}

func measureCurve(ctx context.Context, cfg config, e *env) (*costCurve, error) {
	queueLens, helds, waiters := []int{2, 8, 32, 128, 512, 2048, 5000}, []int{1, 10, 100, 1000, 10000}, 1000
	if cfg.quick {
		queueLens, helds, waiters = []int{2, 16}, []int{1, 100}, 50
	}
	var cc costCurve
	for _, w := range queueLens {
		for _, kind := range []string{kindZklock, kindZkLock} {
			p, err := e.queue(ctx, kind, w, cfg.duration)
			if err != nil {
				return nil, fmt.Errorf("queue curve, W=%d, %s: %w", w, kind, err)
			}
			cc.Queue = append(cc.Queue, p)
		}
	}
	for _, k := range helds {
		p, err := e.held(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("held curve, K=%d: %w", k, err)
		}
		cc.Held = append(cc.Held, p)
	}
	var err error
	if cc.Waiter, err = e.waiterFootprint(ctx, waiters); err != nil {
		return nil, err
	}
	if !cfg.quick {
		if cc.Growth, err = e.heapGrowth(ctx); err != nil {
			return nil, err
		}
	}
	return &cc, nil
}

func (e *env) client(ctx context.Context) (*zklock.Client, error) {
	return zklock.Connect(ctx, e.dial, zklock.WithSessionTimeout(sessionTimeout), zklock.WithCleanupDelay(0))
}

// held takes k leases on k paths with one client, then measures the process
// at rest (CPU per second over a 3-second window, after a second to settle)
// and one more acquire/release cycle.
func (e *env) held(ctx context.Context, k int) (heldPoint, error) {
	c, err := e.client(ctx)
	if err != nil {
		return heldPoint{}, err
	}
	defer c.Close()
	base := fmt.Sprintf("/bench/held-%d", e.seq.Add(1))
	heap0, g0 := heapNow()
	leases, err := acquireMany(ctx, c, base, k)
	if err != nil {
		return heldPoint{}, err
	}
	heap1, g1 := heapNow()
	// At rest means after the acquisitions' tail (the last own-node reads,
	// the sweep after heapNow's collection): settle, then measure longer
	// than one keep-alive interval's jitter.
	time.Sleep(time.Second)
	const window = 3 * time.Second
	cpu0 := benchkit.ProcessCPU()
	time.Sleep(window)
	idle := (benchkit.ProcessCPU() - cpu0) / time.Duration(window/time.Second)

	m, err := c.NewMutex(base + "/extra")
	if err != nil {
		return heldPoint{}, err
	}
	const cycles = 200
	cpu0, t0 := benchkit.ProcessCPU(), time.Now()
	for range cycles {
		l, err := m.Acquire(ctx)
		if err != nil {
			return heldPoint{}, err
		}
		if err := l.Release(ctx); err != nil {
			return heldPoint{}, err
		}
	}
	p := heldPoint{
		K:          k,
		HeapPer:    float64(int64(heap1)-int64(heap0)) / float64(k),
		GoPer:      float64(g1-g0) / float64(k),
		IdleCPU:    ms(idle),
		CycleCPUus: float64((benchkit.ProcessCPU() - cpu0).Microseconds()) / cycles,
		CycleMs:    ms(time.Since(t0)) / cycles,
	}
	for _, l := range leases {
		if err := l.Release(ctx); err != nil {
			return heldPoint{}, err
		}
	}
	return p, nil
}

// acquireMany takes one lease on each of k paths under base, 16 at a time.
func acquireMany(ctx context.Context, c *zklock.Client, base string, k int) ([]*zklock.Lease, error) {
	leases := make([]*zklock.Lease, k)
	errs := make([]error, k)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range k {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			m, err := c.NewMutex(fmt.Sprintf("%s/p%d", base, i))
			if err == nil {
				leases[i], err = m.Acquire(ctx)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return leases, nil
}

// waiterFootprint queues n Acquires of one client behind a holder and
// measures heap and goroutines per waiter, beyond the caller's goroutine.
func (e *env) waiterFootprint(ctx context.Context, n int) (footprint, error) {
	c, err := e.client(ctx)
	if err != nil {
		return footprint{}, err
	}
	defer c.Close()
	m, err := c.NewMutex(fmt.Sprintf("/bench/wait-%d", e.seq.Add(1)))
	if err != nil {
		return footprint{}, err
	}
	holder, err := m.Acquire(ctx)
	if err != nil {
		return footprint{}, err
	}
	heap0, g0 := heapNow()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := m.Acquire(ctx)
			if err == nil {
				err = l.Release(ctx)
			}
			errs <- err
		}()
	}
	for { // every waiter queued and watching (watches are per session and node)
		cs, err := c.Contenders(ctx, m.Path())
		if err != nil {
			return footprint{}, err
		}
		mn, err := e.cluster.Mntr(0)
		if err != nil {
			return footprint{}, err
		}
		if len(cs) == n+1 && mn.WatchCount() >= int64(n) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	heap1, g1 := heapNow()
	f := footprint{N: n, HeapPer: float64(int64(heap1)-int64(heap0)) / float64(n), GoPer: float64(g1-g0-n) / float64(n)}
	if err := holder.Release(ctx); err != nil {
		return footprint{}, err
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return footprint{}, err
		}
	}
	return f, nil
}

// heapGrowth runs uncontended cycles on one client and compares the live heap
// after 1 000 and after 100 000.
func (e *env) heapGrowth(ctx context.Context) (*heapGrowth, error) {
	c, err := e.client(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	m, err := c.NewMutex(fmt.Sprintf("/bench/growth-%d", e.seq.Add(1)))
	if err != nil {
		return nil, err
	}
	var g heapGrowth
	for i := 1; i <= 100_000; i++ {
		l, err := m.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		if err := l.Release(ctx); err != nil {
			return nil, err
		}
		switch i {
		case 1_000:
			g.After1k, _ = heapNow()
		case 100_000:
			g.After100k, _ = heapNow()
		}
	}
	return &g, nil
}

// heapNow is the live heap after a collection, and the goroutine count.
func heapNow() (uint64, int) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, runtime.NumGoroutine()
}

func (cc *costCurve) print(out io.Writer) {
	tw := tabwriter.NewWriter(out, 0, 0, 1, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "cost of one hand-off by queue length (one path)\t\t\t\t\t\t")
	fmt.Fprintln(tw, "W\tkind\thand-off ms\trequests\tbytes\tclient cpu µs\t")
	for _, p := range cc.Queue {
		fmt.Fprintf(tw, "%d\t%s\t%.3f\t%.2f\t%.0f\t%.0f\t\n", p.W, p.Kind, p.HandOff, p.Reqs, p.Bytes, p.CPUus)
	}
	fmt.Fprintln(tw, "\t\t\t\t\t\t")
	fmt.Fprintln(tw, "one client holding K leases (zklock)\t\t\t\t\t\t")
	fmt.Fprintln(tw, "K\theap B/lease\tgoroutines/lease\tidle cpu ms/s\tcycle cpu µs\tcycle ms\t")
	for _, p := range cc.Held {
		fmt.Fprintf(tw, "%d\t%.0f\t%.2f\t%.1f\t%.0f\t%.3f\t\n", p.K, p.HeapPer, p.GoPer, p.IdleCPU, p.CycleCPUus, p.CycleMs)
	}
	tw.Flush()
	fmt.Fprintf(out, "\na waiting Acquire (%d queued on one client): %.0f heap bytes and %.2f goroutines beyond the caller's\n",
		cc.Waiter.N, cc.Waiter.HeapPer, cc.Waiter.GoPer)
	if g := cc.Growth; g != nil {
		fmt.Fprintf(out, "live heap after 1 000 uncontended cycles: %d B; after 100 000: %d B (%+.1f%%)\n",
			g.After1k, g.After100k, 100*(float64(g.After100k)/float64(g.After1k)-1))
	}
}
