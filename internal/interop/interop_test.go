// Package interop proves that zklock's primitives exclude, and queue fairly
// with, the real Apache Curator (Java), kazoo (Python) and go-zookeeper's
// zk.Lock on the same paths. It has only tests; `make test` installs the
// peers first (scripts/install-interop.sh). A missing peer fails the tests
// with a message saying how to install it: they never skip silently.
package interop

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

var (
	servers []string
	paths   atomic.Int64
)

func TestMain(m *testing.M) {
	cluster, stop, err := zktest.StartMain()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	servers = cluster.Addrs()
	dir, err := os.MkdirTemp("", "zklock-interop-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	peerSetup.missing = preparePeers(dir)
	code := m.Run()
	stop()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func newPath(t *testing.T) string {
	return fmt.Sprintf("/interop/%s-%d", t.Name(), paths.Add(1))
}

// Cycles and hold time of the concurrent runs: long enough for the peers to
// interleave many times, short enough for make test.
const (
	cycles = 25
	holdMs = 3
)

// checkExclusive fails the test on any overlap, and makes sure every peer
// held the lock its number of times.
func checkExclusive(t *testing.T, rec *record, want map[string]int) {
	t.Helper()
	holds := rec.all()
	v := exclusionViolations(holds)
	assert.Empty(t, v, "overlapping holds: %d", len(v))
	got := map[string]int{}
	for _, h := range holds {
		got[h.who]++
	}
	assert.Equal(t, want, got, "holds per peer")
}

// On one path, zklock's Mutex, Curator's InterProcessMutex and go-zookeeper's
// zk.Lock cycle concurrently: never two holders at once.
func TestMutexExcludesCuratorAndZkLock(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	p := newPath(t)
	rec := &record{}
	m, err := zklockClient(t).NewMutex(p)
	require.NoError(t, err)
	cur := startJava(t, rec, "curator", p, "mutex", cycles, holdMs)
	cur.waitReady(t)
	g1 := runGo(rec, "zklock", false, cycles, holdMs*time.Millisecond, leaseTaker(m.Acquire))
	g2 := runGo(rec, "zk.Lock", false, cycles, holdMs*time.Millisecond, zkLockTaker(t, p))
	cur.wait(t)
	g1.wait(t)
	g2.wait(t)
	checkExclusive(t, rec, map[string]int{"curator": cycles, "zklock": cycles, "zk.Lock": cycles})
}

// The same with kazoo's Lock, which must be told zklock's and zk.Lock's
// marker (extra_lock_patterns=("-lock-",)); zklock and zk.Lock read kazoo's.
func TestMutexExcludesKazooAndZkLock(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	p := newPath(t)
	rec := &record{}
	m, err := zklockClient(t).NewMutex(p)
	require.NoError(t, err)
	kz := startKazoo(t, rec, "kazoo", p, "mutex", cycles, holdMs, "-lock-")
	kz.waitReady(t)
	g1 := runGo(rec, "zklock", false, cycles, holdMs*time.Millisecond, leaseTaker(m.Acquire))
	g2 := runGo(rec, "zk.Lock", false, cycles, holdMs*time.Millisecond, zkLockTaker(t, p))
	kz.wait(t)
	g1.wait(t)
	g2.wait(t)
	checkExclusive(t, rec, map[string]int{"kazoo": cycles, "zklock": cycles, "zk.Lock": cycles})
}

// Arrival order across libraries: while zklock holds, a Curator (or kazoo)
// waiter, a zk.Lock waiter and a zklock waiter queue one after another; they
// are served in that order.
func TestMutexServesPeersInArrivalOrder(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	for _, peer := range []string{"curator", "kazoo"} {
		t.Run(peer, func(t *testing.T) {
			p := newPath(t)
			rec := &record{}
			c := zklockClient(t)
			m, err := c.NewMutex(p)
			require.NoError(t, err)
			holder, err := m.Acquire(context.Background())
			require.NoError(t, err)
			obs := observer(t)

			var other *proc
			if peer == "curator" {
				other = startJava(t, rec, peer, p, "mutex", 1, 20)
			} else {
				other = startKazoo(t, rec, peer, p, "mutex", 1, 20, "-lock-")
			}
			waitChildren(t, obs, p, 2)
			g1 := runGo(rec, "zk.Lock", false, 1, 20*time.Millisecond, zkLockTaker(t, p))
			waitChildren(t, obs, p, 3)
			m2, err := zklockClient(t).NewMutex(p)
			require.NoError(t, err)
			g2 := runGo(rec, "zklock", false, 1, 20*time.Millisecond, leaseTaker(m2.Acquire))
			waitChildren(t, obs, p, 4)

			require.NoError(t, holder.Release(context.Background()))
			other.wait(t)
			g1.wait(t)
			g2.wait(t)
			var order []string
			for _, h := range sortByAcq(rec.all()) {
				order = append(order, h.who)
			}
			assert.Equal(t, []string{peer, "zk.Lock", "zklock"}, order)
			assert.Empty(t, exclusionViolations(rec.all()))
		})
	}
}

// zklock's RWMutex and Curator's InterProcessReadWriteLock, readers and
// writers of both, on one path: writers hold alone, readers share.
func TestRWMutexWithCurator(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	p := newPath(t)
	rw, err := zklockClient(t).NewRWMutex(p)
	require.NoError(t, err)
	rw2, err := zklockClient(t).NewRWMutex(p)
	require.NoError(t, err)
	runRW(t, p, rw, rw2, func(rec *record, kind string, n int) *proc {
		return startJava(t, rec, "curator-"+kind, p, kind, n, holdMs)
	})
}

// zklock's RWMutex with KazooNames and kazoo's WriteLock and ReadLock on one
// path. kazoo 2.8 (Debian bookworm) has a deadlock of its own: a ReadLock
// that recomputes its predecessor takes a writer queued after it for one
// ahead of it (python-zk/kazoo#649, fixed in 2.9.0), so a kazoo reader
// deadlocks with any later writer, kazoo's included. The kazoo writer runs
// concurrently with zklock's readers and writers; the kazoo reader runs in
// an order that keeps it clear of that bug: it queues behind a zklock
// writer, shares with a zklock reader, and a zklock writer that arrives
// while they hold waits for both.
func TestRWMutexWithKazoo(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	p := newPath(t)
	rw, err := zklockClient(t).NewRWMutex(p, zklock.KazooNames())
	require.NoError(t, err)
	rw2, err := zklockClient(t).NewRWMutex(p, zklock.KazooNames())
	require.NoError(t, err)
	rec := &record{}
	kw := startKazoo(t, rec, "kazoo-write", p, "write", cycles/2, holdMs)
	kw.waitReady(t)
	gr := runGo(rec, "zklock-read", true, cycles, holdMs*time.Millisecond, leaseTaker(rw.AcquireRead))
	gw := runGo(rec, "zklock-write", false, cycles/2, holdMs*time.Millisecond, leaseTaker(rw2.AcquireWrite))
	kw.wait(t)
	gr.wait(t)
	gw.wait(t)
	checkExclusive(t, rec, map[string]int{"kazoo-write": cycles / 2, "zklock-read": cycles, "zklock-write": cycles / 2})

	rec = &record{}
	obs := observer(t)
	w1, err := rw.AcquireWrite(context.Background())
	require.NoError(t, err)
	kr := startKazoo(t, rec, "kazoo-read", p, "read", 1, 300)
	waitChildren(t, obs, p, 2)
	zr := runGo(rec, "zklock-read", true, 1, 300*time.Millisecond, leaseTaker(rw2.AcquireRead))
	waitChildren(t, obs, p, 3)
	require.NoError(t, w1.Release(context.Background()))
	select { // the kazoo reader holds before any writer queues behind it
	case <-kr.acquired:
	case <-time.After(30 * time.Second):
		t.Fatal("the kazoo reader was not granted")
	}
	zw := runGo(rec, "zklock-write", false, 1, time.Millisecond, leaseTaker(rw.AcquireWrite))
	kr.wait(t)
	zr.wait(t)
	zw.wait(t)
	holds := rec.all()
	assert.Empty(t, exclusionViolations(holds))
	assert.Equal(t, 2, mostAtOnce(holds), "the kazoo reader and the zklock reader shared")
}

// runRW runs a reader and a writer of each side concurrently and checks
// that no writer overlapped anyone, and that readers did share.
func runRW(t *testing.T, p string, rw, rw2 *zklock.RWMutex, peer func(rec *record, kind string, n int) *proc) {
	rec := &record{}
	pr, pw := peer(rec, "read", cycles), peer(rec, "write", cycles/2)
	pr.waitReady(t)
	pw.waitReady(t)
	gr := runGo(rec, "zklock-read", true, cycles, holdMs*time.Millisecond, leaseTaker(rw.AcquireRead))
	gw := runGo(rec, "zklock-write", false, cycles/2, holdMs*time.Millisecond, leaseTaker(rw2.AcquireWrite))
	pr.wait(t)
	pw.wait(t)
	gr.wait(t)
	gw.wait(t)
	checkExclusive(t, rec, map[string]int{pr.name: cycles, pw.name: cycles / 2, "zklock-read": cycles, "zklock-write": cycles / 2})

	// Readers share: a peer reader is granted while a zklock reader holds.
	// (Whether the concurrent readers above overlapped is up to the
	// scheduler; a loaded machine ran them one after another.)
	l, err := rw.AcquireRead(context.Background())
	require.NoError(t, err)
	shared := peer(&record{}, "read", 1)
	select {
	case <-shared.acquired:
	case <-time.After(30 * time.Second):
		t.Fatal("the peer reader waited for a zklock reader")
	}
	require.NoError(t, l.Release(context.Background()))
	shared.wait(t)
}

// zklock's Semaphore and Curator's InterProcessSemaphoreV2 (same layout,
// same N) on one path: never more than N holders, and N reached.
func TestSemaphoreWithCurator(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	p := newPath(t)
	const n = 2
	// Holds ten times the usual: N reached needs two holds to overlap, which
	// 3 ms holds on a loaded machine did not always do.
	const semHoldMs = 10 * holdMs
	rec := &record{}
	var gs []*goPeer
	var procs []*proc
	for i := range 2 {
		procs = append(procs, startJava(t, rec, fmt.Sprintf("curator-%d", i), p, fmt.Sprintf("semaphore:%d", n), cycles, semHoldMs))
	}
	for _, pr := range procs {
		pr.waitReady(t)
	}
	for i := range 2 {
		s, err := zklockClient(t).NewSemaphore(p, n)
		require.NoError(t, err)
		gs = append(gs, runGo(rec, fmt.Sprintf("zklock-%d", i), false, cycles, semHoldMs*time.Millisecond, leaseTaker(s.Acquire)))
	}
	for _, pr := range procs {
		pr.wait(t)
	}
	for _, g := range gs {
		g.wait(t)
	}
	holds := rec.all()
	require.Len(t, holds, 4*cycles)
	most := mostAtOnce(holds)
	assert.LessOrEqual(t, most, n)
	assert.Equal(t, n, most, "both permits were used at once")
}

// zklock taking 2 permits at once (AcquireN) and 1, beside two Curator
// InterProcessSemaphoreV2s taking 1, on one path of N=3: Curator counts
// each of zklock's permits, so never more than 3 permits are taken at once,
// and the 2 are taken at all.
func TestSemaphorePermitsWithCurator(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	p := newPath(t)
	const n = 3
	const holdFor = 20 // ms: long enough for the holds to overlap often
	rec := &record{}
	var procs []*proc
	for i := range 2 {
		procs = append(procs, startJava(t, rec, fmt.Sprintf("curator-%d", i), p, fmt.Sprintf("semaphore:%d", n), cycles, holdFor))
	}
	for _, pr := range procs {
		pr.waitReady(t)
	}
	s2, err := zklockClient(t).NewSemaphore(p, n)
	require.NoError(t, err)
	s1, err := zklockClient(t).NewSemaphore(p, n)
	require.NoError(t, err)
	two := func(ctx context.Context) (*zklock.Lease, error) { return s2.AcquireN(ctx, 2) }
	gs := []*goPeer{
		runGo(rec, "zklock-2", false, cycles, holdFor*time.Millisecond, leaseTaker(two)),
		runGo(rec, "zklock-1", false, cycles, holdFor*time.Millisecond, leaseTaker(s1.Acquire)),
	}
	for _, pr := range procs {
		pr.wait(t)
	}
	for _, g := range gs {
		g.wait(t)
	}
	holds := rec.all()
	require.Len(t, holds, 4*cycles)
	permits := func(h hold) int {
		if h.who == "zklock-2" {
			return 2
		}
		return 1
	}
	most := 0
	for _, a := range holds {
		taken := 0
		for _, b := range holds {
			if b.acq <= a.acq && a.acq < b.rel {
				taken += permits(b)
			}
		}
		most = max(most, taken)
	}
	assert.LessOrEqual(t, most, n, "permits taken at once")
	assert.GreaterOrEqual(t, most, 2)
}

func observer(t *testing.T) *zk.Conn {
	t.Helper()
	return zktest.Connect(t, servers, 10*time.Second).Conn
}

// waitChildren waits until path has n children.
func waitChildren(t *testing.T, conn *zk.Conn, path string, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		children, _, ch, err := conn.ChildrenW(path)
		if err == nil && len(children) == n {
			return
		}
		if err != nil {
			time.Sleep(20 * time.Millisecond) // the path does not exist yet
			continue
		}
		select {
		case <-ch:
		case <-time.After(time.Until(deadline)):
		}
	}
	t.Fatalf("%s never had %d children", path, n)
}

func sortByAcq(holds []hold) []hold {
	for i := 1; i < len(holds); i++ {
		for j := i; j > 0 && holds[j].acq < holds[j-1].acq; j-- {
			holds[j], holds[j-1] = holds[j-1], holds[j]
		}
	}
	return holds
}
