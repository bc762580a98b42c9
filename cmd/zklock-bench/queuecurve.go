package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zklock/zklock/internal/benchkit"
)

// The queue curve measures one path with W workers queued, each on its own
// session, in a steady state, up to W = 5 000. Three things differ from the
// table's runs, because at such W the ramp and the drain would be the run:
//
//   - the sessions connect connBatch at a time, and the workers join the
//     queue joinBatch at a time, each batch once the one before is queued
//     (every waiter watching). The W first listings (W²/2 names in all, about
//     600 MB at W = 5 000) then neither pile up in the server nor count;
//   - the window opens once all W are queued and lasts the run's duration and
//     at least minHandOffs hand-offs: at W = 5 000 a hand-off lists 5 000
//     names and a 1.2 s window would hold too few;
//   - the window closes without draining the queue (W more hand-offs): the
//     waiters are cancelled, what is left of the queue is deleted from its
//     tail in one transaction (so no waiter lists the long queue again; see
//     clearQueue), and the sessions close connBatch at a time.
//
// At W = 5 000 this takes about 25 s per kind, most of it the queue's build
// (its listings), and go-zookeeper's buffers weigh about 3 MB per session
// (some 15 GB at W = 5 000, given back after the run). The requests per
// hand-off include the W sessions' pings (one every 3.3 s each).
const (
	minHandOffs = 200
	connBatch   = 32
	joinBatch   = 128
	// queueWait bounds every wait of a queue run (a batch joining, the window).
	queueWait = 2 * time.Minute
)

// queueRun is W workers cycling on one path until stopped.
type queueRun struct {
	e        *env
	kind     string
	path     string
	d        time.Duration // the window's least length
	ls       []locker
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	stopped  atomic.Bool
	acqs     atomic.Int64
	inside   atomic.Int32
	overlaps atomic.Int64
	failOnce sync.Once
	failed   chan struct{} // closed with err set, on a worker's first error before stop
	err      error
}

// queue measures one hand-off with w workers queued on one path.
func (e *env) queue(ctx context.Context, kind string, w int, d time.Duration) (queuePoint, error) {
	admin, err := benchkit.RawConn(ctx, e.dial, sessionTimeout)
	if err != nil {
		return queuePoint{}, err
	}
	defer admin.Close()
	q := &queueRun{e: e, kind: kind, path: fmt.Sprintf("/bench/%d/p0", e.seq.Add(1)), d: d, failed: make(chan struct{})}
	q.ctx, q.cancel = context.WithCancel(ctx)
	if q.ls, err = connectAll(ctx, kind, e.dial, q.path, w); err != nil {
		q.cancel()
		closeAll(q.ls)
		return queuePoint{}, err
	}
	var p queuePoint
	err = q.join()
	if err == nil {
		p, err = q.measure()
	}
	err = errors.Join(err, q.halt(admin))
	debug.FreeOSMemory() // every session's buffers (3 MB each in go-zookeeper) back to the system
	if n := q.overlaps.Load(); err == nil && n > 0 {
		err = fmt.Errorf("%s on W=%d: MUTUAL EXCLUSION VIOLATED: %d overlapping holds", kind, w, n)
	}
	return p, err
}

// connectAll opens n lockers on path, connBatch at a time, in order.
func connectAll(ctx context.Context, kind string, dial []string, path string, n int) ([]locker, error) {
	ls := make([]locker, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, connBatch)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			ls[i], errs[i] = newLocker(ctx, kind, dial, path)
		}()
	}
	wg.Wait()
	ls = slices.DeleteFunc(ls, func(l locker) bool { return l == nil })
	return ls, errors.Join(errs...)
}

// closeAll closes every locker, connBatch at a time.
func closeAll(ls []locker) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, connBatch)
	for _, l := range ls {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			l.close()
		}()
	}
	wg.Wait()
}

// work cycles one locker until stopped. An overlap counts only before stop:
// after it, sessions closing under holders let others in.
func (q *queueRun) work(l locker) {
	defer q.wg.Done()
	for !q.stopped.Load() {
		if err := l.lock(q.ctx); err != nil {
			q.fail(err)
			return
		}
		q.acqs.Add(1)
		if q.inside.Add(1) != 1 && !q.stopped.Load() {
			q.overlaps.Add(1)
		}
		runtime.Gosched() // let another holder show itself, if there is one
		q.inside.Add(-1)
		if err := l.unlock(q.ctx); err != nil {
			q.fail(err)
			return
		}
	}
}

func (q *queueRun) fail(err error) {
	if q.stopped.Load() {
		return
	}
	q.failOnce.Do(func() { q.err = err; close(q.failed) })
}

// join starts the workers joinBatch at a time, each batch once the queue
// holds everyone started so far.
func (q *queueRun) join() error {
	for n := 0; n < len(q.ls); {
		m := min(n+joinBatch, len(q.ls))
		for _, l := range q.ls[n:m] {
			q.wg.Add(1)
			go q.work(l)
		}
		n = m
		want := queuedWatches(q.kind, n)
		if err := q.await(func() (bool, error) {
			mn, err := q.e.cluster.Mntr(0)
			return err == nil && mn.WatchCount() >= want, err
		}); err != nil {
			return fmt.Errorf("%d of %d queued: %w", n, len(q.ls), err)
		}
	}
	return nil
}

// queuedWatches is the server's watch count once n workers are queued on one
// path: every waiter watches the node ahead, and zklock's also their own
// (the holder's too). One hand-off in progress hides up to three.
func queuedWatches(kind string, n int) int64 {
	per := 1
	if kind == kindZklock {
		per = 2
	}
	return int64(max(0, per*(n-1)-3))
}

// await polls done until it is true, a worker fails or queueWait passes.
func (q *queueRun) await(done func() (bool, error)) error {
	deadline := time.Now().Add(queueWait)
	for {
		ok, err := done()
		switch {
		case err != nil:
			return err
		case ok:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("not within %v", queueWait)
		}
		select {
		case <-q.failed:
			return q.err
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// measure takes the window: the run's duration and at least minHandOffs.
func (q *queueRun) measure() (queuePoint, error) {
	before, err := q.e.snapshot(q.ctx)
	if err != nil {
		return queuePoint{}, err
	}
	a0 := q.acqs.Load()
	if err := q.await(func() (bool, error) {
		return time.Since(before.at) >= q.d && q.acqs.Load()-a0 >= minHandOffs, nil
	}); err != nil {
		return queuePoint{}, fmt.Errorf("window: %w", err)
	}
	after, err := q.e.snapshot(q.ctx)
	if err != nil {
		return queuePoint{}, err
	}
	n := float64(q.acqs.Load() - a0)
	per := func(key string) float64 { return float64(after.mntr.Int(key)-before.mntr.Int(key)) / n }
	return queuePoint{W: len(q.ls), Kind: q.kind, HandOff: ms(after.at.Sub(before.at)) / n,
		Reqs:  per("zk_cnt_updatelatency") + per("zk_cnt_readlatency"),
		Bytes: per("zk_bytes_received_count") + per("zk_response_bytes"),
		CPUus: float64((after.cpu - before.cpu).Microseconds()) / n}, nil
}

// halt stops the workers without draining the queue: cancelled (zklock's
// waiters leave), the rest of the queue deleted from its tail, the sessions
// closed (zk.Lock's waiters return).
func (q *queueRun) halt(admin *zk.Conn) error {
	q.stopped.Store(true)
	q.cancel()
	err := clearQueue(admin, q.path)
	closeAll(q.ls)
	q.wg.Wait()
	return err
}

// clearQueue deletes the nodes under path, the newest first, in one
// transaction: a waiter woken by it lists only what is left. While more than
// headKept are left, it spares the lowest headKept, where the hand-offs still
// under way delete (a multi fails whole on a node already gone); those few
// drain, and a last pass deletes the rest.
func clearQueue(admin *zk.Conn, path string) error {
	const headKept = 64
	for range 1000 {
		names, _, err := admin.Children(path)
		if errors.Is(err, zk.ErrNoNode) || err == nil && len(names) == 0 {
			return nil
		}
		if err != nil {
			return err
		}
		names = tailFirst(names)
		if len(names) > headKept {
			names = names[:len(names)-headKept]
		}
		ops := make([]any, 0, len(names))
		for _, n := range names {
			ops = append(ops, &zk.DeleteRequest{Path: path + "/" + n, Version: -1})
		}
		if _, err = admin.Multi(ops...); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		} else if err != nil {
			time.Sleep(10 * time.Millisecond) // a node left meanwhile; list again
		}
	}
	return fmt.Errorf("%s: the queue does not empty", path)
}

// tailFirst orders sequential node names by their sequence number (the
// ten digits that end them), the highest first.
func tailFirst(names []string) []string {
	seq := func(n string) string { return n[max(0, len(n)-10):] }
	out := slices.Clone(names)
	slices.SortFunc(out, func(a, b string) int { return strings.Compare(seq(b), seq(a)) })
	return out
}
