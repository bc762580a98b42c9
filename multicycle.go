package zklock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zklock/zklock/internal/lockpath"
)

// A wait-for cycle between multi-locks: zklock's MultiLock takes its paths in
// sorted order, so two of them never form one, but a peer that takes them in
// another order (Curator's InterProcessMultiLock takes them as given) can
// hold b and wait for a while zklock holds a and waits for b: both would
// wait for ever. While a MultiLock holds some parts and waits for the next,
// it looks for that cycle: the session holding the path it waits for also
// queued behind it on a path it holds. Then it yields: it releases what it
// holds, backs off a random moment and queues again, so that both finish.

// errYield ends an attempt of MultiLock.acquire that found a cycle.
var errYield = errors.New("zklock: multi-lock yields: the holder of the path it waits for waits behind it")

// When to look: first after cycleFirstCheck of waiting (a cycle is rare and a
// short wait common), then every cycleCheckEvery; at most cycleMaxReads
// sessions read per held path and look. Back-off after a yield: a random
// moment up to yieldBackoffMax.
const (
	cycleFirstCheck = 100 * time.Millisecond
	cycleCheckEvery = 500 * time.Millisecond
	cycleMaxReads   = 32
	yieldBackoffMax = 300 * time.Millisecond
)

// cycleCheck is one MultiLock wait's look for a cycle: the path it waits
// for, and the parts it holds meanwhile.
type cycleCheck struct {
	c     *Client
	path  string
	parts []*Lease
}

// watchCycle looks for a cycle while the caller waits for path holding
// parts, until stop is called; it calls yield, once, when it finds one.
func watchCycle(c *Client, path string, parts []*Lease, yield func()) (stop func()) {
	done := make(chan struct{})
	if len(parts) == 0 || !c.track() {
		return func() {}
	}
	check := cycleCheck{c: c, path: path, parts: parts}
	var mu sync.Mutex // a look still under way when stop is called must not yield after it
	stopped := false
	go func() {
		defer c.wg.Done()
		t := time.NewTimer(cycleFirstCheck)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-c.closing:
				return
			case <-t.C:
			}
			if check.inCycle() {
				mu.Lock()
				if !stopped {
					yield()
				}
				mu.Unlock()
				return
			}
			t.Reset(cycleCheckEvery)
		}
	}()
	return func() {
		mu.Lock()
		stopped = true
		mu.Unlock()
		close(done)
	}
}

// inCycle reports whether the session holding the awaited path queued
// behind one of the parts. Any failure to read says no: the wait goes on,
// and the next look may tell.
func (k cycleCheck) inCycle() bool {
	holder, ok := k.holderSession()
	if !ok {
		return false
	}
	for _, p := range k.parts {
		if holder == p.onNode().q.sess.id {
			return false // ours: about to be granted
		}
		if k.queuedBehind(p.onNode().q, holder) {
			return true
		}
	}
	return false
}

// holderSession is the session of the first node in the awaited path's queue.
func (k cycleCheck) holderSession() (int64, bool) {
	c, path := k.c, k.path
	children, _, err := c.conn.Children(path)
	if err != nil {
		return 0, false
	}
	nodes := lockpath.Sorted(children)
	if len(nodes) == 0 {
		return 0, false
	}
	ok, stat, err := c.conn.Exists(path + "/" + nodes[0].Name)
	if err != nil || !ok {
		return 0, false
	}
	return stat.EphemeralOwner, true
}

// queuedBehind reports whether session owns a node queued after q's.
func (k cycleCheck) queuedBehind(q *queueNode, session int64) bool {
	c := k.c
	children, _, err := c.conn.Children(q.path)
	if err != nil {
		return false
	}
	var later []lockpath.Node
	for _, n := range lockpath.Sorted(children) {
		if n.Seq > q.seq && len(later) < cycleMaxReads {
			later = append(later, n)
		}
	}
	// Pipelined: go-zookeeper sends them all before the first reply.
	reads := make([]<-chan result[*zk.Stat], len(later))
	for i, n := range later {
		node := q.path + "/" + n.Name
		reads[i] = goCall(c, func() (*zk.Stat, error) {
			_, stat, err := c.conn.Exists(node)
			return stat, err
		})
	}
	found := false
	for _, r := range reads {
		res := <-r
		if res.err == nil && res.v != nil && res.v.EphemeralOwner == session {
			found = true
		}
	}
	return found
}

// yielded logs and counts a yield, then backs off; it fails only when ctx
// ends or the client closes meanwhile.
func (ml *MultiLock) yielded(ctx context.Context) error {
	c := ml.c
	c.log.Info("zklock: multi-lock yields to break a wait-for cycle with another client; queueing again", "paths", ml.Paths())
	c.opts.metrics.MultiLockYielded(ml.Paths())
	if err := c.sleep(ctx, rand.N(yieldBackoffMax)+time.Millisecond); err != nil {
		return fmt.Errorf("%w (after yielding to break a wait-for cycle)", err)
	}
	return nil
}
