package zklock_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// Benchmarks put zklock beside go-zookeeper's zk.Lock, and beside the bare
// request floor (create + getChildren + delete, no lock logic), in one run:
// on a noisy 2-core machine only the ratios and the request counts mean much.
//
//	go test -run '^$' -bench . -benchtime 2000x

type locker interface {
	lock() error
	unlock() error
}

type zklockLocker struct {
	m *zklock.Mutex
	l *zklock.Lease
}

func (z *zklockLocker) lock() (err error) { z.l, err = z.m.Acquire(context.Background()); return err }
func (z *zklockLocker) unlock() error     { return z.l.Release(context.Background()) }

type floorLocker struct {
	conn *zk.Conn
	path string
	node string
}

func (f *floorLocker) lock() (err error) {
	f.node, err = f.conn.Create(f.path+"/n-lock-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err == nil {
		_, _, err = f.conn.Children(f.path)
	}
	return err
}
func (f *floorLocker) unlock() error { return f.conn.Delete(f.node, -1) }

func benchConn(b *testing.B) *zk.Conn {
	conn, events, err := zk.Connect(cluster.Addrs(), 30*time.Second, zk.WithLogger(log.New(io.Discard, "", 0)), zk.WithLogInfo(false))
	if err != nil {
		b.Fatal(err)
	}
	for ev := range events {
		if ev.State == zk.StateHasSession {
			break
		}
	}
	go func() {
		for range events {
		}
	}()
	b.Cleanup(conn.Close)
	return conn
}

// newLocker makes one worker's locker of the given kind, each on its own
// session as separate processes would be.
func newLocker(b *testing.B, kind, path string) locker {
	switch kind {
	case "zklock", "zklock-nowatch":
		opts := []zklock.Option{zklock.WithSessionTimeout(30 * time.Second), zklock.WithCleanupDelay(0)}
		if kind == "zklock-nowatch" {
			opts = append(opts, zklock.WithOwnNodeWatch(false))
		}
		c := connect(b, opts...)
		m, err := c.NewMutex(path)
		if err != nil {
			b.Fatal(err)
		}
		return &zklockLocker{m: m}
	case "zk.Lock":
		conn := benchConn(b)
		l := zk.NewLock(conn, path, zk.WorldACL(zk.PermAll))
		return l2locker{l}
	case "floor":
		conn := benchConn(b)
		ensurePath(b, conn, path)
		return &floorLocker{conn: conn, path: path}
	}
	panic(kind)
}

type l2locker struct{ l *zk.Lock }

func (l l2locker) lock() error   { return l.l.Lock() }
func (l l2locker) unlock() error { return l.l.Unlock() }

func ensurePath(b *testing.B, conn *zk.Conn, p string) {
	parts := ""
	for _, seg := range splitPath(p) {
		parts += "/" + seg
		if _, err := conn.Create(parts, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
			b.Fatal(err)
		}
	}
}

func splitPath(p string) []string {
	var out []string
	start := 1
	for i := 1; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' {
			out = append(out, p[start:i])
			start = i + 1
		}
	}
	return out
}

// zklock-nowatch is zklock without the holder's watch on its own node (and so
// without the read that sets it): the bare request budget.
var kinds = []string{"zklock", "zklock-nowatch", "zk.Lock", "floor"}

// run drives workers lockers through b.N acquire/release cycles in all, with
// a mutual exclusion check where the kind is a lock, and reports hand-offs
// per second and the server's request counts per acquisition.
func run(b *testing.B, ls []locker, exclusive bool) {
	for _, l := range ls { // warm-up
		if err := l.lock(); err != nil {
			b.Fatal(err)
		}
		if err := l.unlock(); err != nil {
			b.Fatal(err)
		}
	}
	var inside, overlaps atomic.Int32
	var next atomic.Int64
	var wg sync.WaitGroup
	waits := make([][]time.Duration, len(ls))
	before, _ := cluster.Mntr(0)
	cpu0 := cpuTime()
	b.ResetTimer()
	start := time.Now()
	for i, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				err := l.lock()
				waits[i] = append(waits[i], time.Since(t0))
				if err != nil {
					b.Error(err)
					return
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				inside.Add(-1)
				if err := l.unlock(); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	cpu := cpuTime() - cpu0
	after, _ := cluster.Mntr(0)
	if exclusive && overlaps.Load() != 0 {
		b.Fatalf("%d overlaps", overlaps.Load())
	}
	n := float64(b.N)
	var all []time.Duration
	for _, w := range waits {
		all = append(all, w...)
	}
	slices.Sort(all)
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(n/elapsed.Seconds(), "acq/s")
	b.ReportMetric(float64(cpu.Microseconds())/1000/n, "cpu-ms/acq")
	b.ReportMetric(float64(after.Int("zk_cnt_updatelatency")-before.Int("zk_cnt_updatelatency"))/n, "writes/acq")
	b.ReportMetric(float64(after.Int("zk_cnt_readlatency")-before.Int("zk_cnt_readlatency"))/n, "reads/acq")
	b.ReportMetric(float64(zktest.WatchEventsFired(before, after))/n, "watchev/acq")
}

// Workload A: one worker, acquire then release.
func BenchmarkUncontended(b *testing.B) {
	for _, kind := range kinds {
		b.Run(kind, func(b *testing.B) {
			run(b, []locker{newLocker(b, kind, fmt.Sprintf("/bench/a-%d", pathSeq.Add(1)))}, kind != "floor")
		})
	}
}

// Workload B: W workers on one lock path.
func BenchmarkContended(b *testing.B) {
	for _, w := range []int{2, 8, 32} {
		for _, kind := range kinds[:3] {
			b.Run(fmt.Sprintf("W=%d/%s", w, kind), func(b *testing.B) {
				p := fmt.Sprintf("/bench/b-%d", pathSeq.Add(1))
				ls := make([]locker, w)
				for i := range ls {
					ls[i] = newLocker(b, kind, p)
				}
				run(b, ls, true)
			})
		}
	}
}

// Workload D: 8 workers, each on its own lock path.
func BenchmarkManyPaths(b *testing.B) {
	for _, kind := range kinds {
		b.Run(kind, func(b *testing.B) {
			ls := make([]locker, 8)
			for i := range ls {
				ls[i] = newLocker(b, kind, fmt.Sprintf("/bench/d-%d", pathSeq.Add(1)))
			}
			run(b, ls, kind != "floor")
		})
	}
}

// The cost of a waiting Acquire in the waiting process: goroutines beyond
// the caller's own, and heap bytes, while b.N waiters queue behind a holder.
func BenchmarkWaiterFootprint(b *testing.B) {
	p := fmt.Sprintf("/bench/f-%d", pathSeq.Add(1))
	c := connect(b, zklock.WithCleanupDelay(0))
	m, err := c.NewMutex(p)
	if err != nil {
		b.Fatal(err)
	}
	holder, err := m.Acquire(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	obs := benchConn(b)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heap0, g0 := ms.HeapAlloc, runtime.NumGoroutine()

	var wg sync.WaitGroup
	for i := 0; i < b.N; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := m.Acquire(context.Background())
			if err != nil {
				b.Error(err)
				return
			}
			_ = l.Release(context.Background())
		}()
	}
	for {
		children, _, err := obs.Children(p)
		if err != nil {
			b.Fatal(err)
		}
		m, _ := cluster.Mntr(0)
		// Every waiter queued and settled: every node is watched (one
		// session's watches on a path count once).
		if len(children) == b.N+1 && m.WatchCount() >= int64(b.N+1) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(runtime.NumGoroutine()-g0-b.N)/float64(b.N), "extra-goroutines/waiter")
	b.ReportMetric(float64(int64(ms.HeapAlloc)-int64(heap0))/float64(b.N), "heap-B/waiter")
	if err := holder.Release(context.Background()); err != nil {
		b.Fatal(err)
	}
	wg.Wait()
}

// cpuTime is the user and system CPU this test process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
