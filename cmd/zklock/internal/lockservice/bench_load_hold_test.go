package lockservice_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/zklock/zklock/cmd/zklock/internal/lockservice"
)

// holdCost is what one holding costs the service process: the growth of
// its live heap, goroutine stacks and goroutines, divided by the holdings.
type holdCost struct {
	heap, stack, goroutines float64
}

func costOf(before, after loadStats, n int) holdCost {
	return holdCost{
		heap:       float64(after.HeapAlloc-before.HeapAlloc) / float64(n),
		stack:      float64(after.StackInuse-before.StackInuse) / float64(n),
		goroutines: float64(after.Goroutines-before.Goroutines) / float64(n),
	}
}

// parallel runs f(0..n-1) at once and returns their errors joined.
func parallel(n int, f func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	wg.Add(n)
	for i := range n {
		go func() {
			defer wg.Done()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// heldStream is a stream holding its lock.
type heldStream struct {
	w    *streamWorker
	resp *http.Response
	rd   *bufio.Reader
	id   string
}

// streamHoldings measures n streams holding a lock each (paths of their
// own), each on its own connection: a stream's connection is part of it.
func (e *loadEnv) streamHoldings(ctx context.Context, n int) (holdCost, error) {
	before, err := e.child.settled(ctx)
	if err != nil {
		return holdCost{}, err
	}
	seq := benchSeq.Add(1)
	hs := make([]heldStream, n)
	err = parallel(n, func(i int) error {
		w := &streamWorker{hc: newCallerHTTP(), url: e.child.url, path: fmt.Sprintf("/zklock-serve-load/%d/p%d", seq, i)}
		resp, rd, ev, err := w.open(ctx)
		hs[i] = heldStream{w: w, resp: resp, rd: rd, id: ev.ID}
		return err
	})
	after, serr := e.child.settled(ctx)
	rerr := parallel(n, func(i int) error {
		h := hs[i]
		defer h.w.close(ctx)
		if h.resp == nil {
			return nil
		}
		defer h.resp.Body.Close()
		return h.w.release(ctx, h.rd, h.id)
	})
	return costOf(before, after, n), errors.Join(err, serr, rerr)
}

// leaseHoldings measures n leases holding a lock each, with no connection
// open (callers of leases need none between their requests); it checks
// that every lease still held its lock at the end (revoke released it).
func (e *loadEnv) leaseHoldings(ctx context.Context, n int) (holdCost, error) {
	before, err := e.child.settled(ctx)
	if err != nil {
		return holdCost{}, err
	}
	seq := benchSeq.Add(1)
	ws := make([]*leaseWorker, n)
	err = parallel(n, func(i int) error {
		ws[i] = &leaseWorker{hc: newCallerHTTP(), url: e.child.url, path: fmt.Sprintf("/zklock-serve-load/%d/p%d", seq, i)}
		if err := ws[i].keepAlive(ctx); err != nil {
			return err
		}
		_, err := ws[i].take(ctx, lockservice.LeaseAcquireRequest{Try: true})
		ws[i].hc.CloseIdleConnections()
		return err
	})
	after, serr := e.child.settled(ctx)
	rerr := parallel(n, func(i int) error {
		w := ws[i]
		defer w.close(ctx)
		if w.lease == "" {
			return nil
		}
		released, err := w.revoke(ctx)
		if err == nil && released != 1 {
			err = fmt.Errorf("lease on %s released %d locks at the end, not 1", w.path, released)
		}
		return err
	})
	return costOf(before, after, n), errors.Join(err, serr, rerr)
}
