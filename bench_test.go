package zklock_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"sync"
	"sync/atomic"
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
	case "zklock":
		c := connect(b, append([]zklock.Option{zklock.WithSessionTimeout(30 * time.Second), zklock.WithCleanupDelay(0)}, benchOpts...)...)
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

var benchOpts []zklock.Option

var kinds = []string{"zklock", "zk.Lock", "floor"}

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
	before, _ := cluster.Mntr(0)
	b.ResetTimer()
	start := time.Now()
	for _, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if err := l.lock(); err != nil {
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
	after, _ := cluster.Mntr(0)
	if exclusive && overlaps.Load() != 0 {
		b.Fatalf("%d overlaps", overlaps.Load())
	}
	n := float64(b.N)
	b.ReportMetric(n/elapsed.Seconds(), "acq/s")
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
		for _, kind := range kinds[:2] {
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
