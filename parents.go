package zklock

// This file creates a lock path and its missing ancestors, as container
// nodes where the server has them and the cleaner may remove them.

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-zookeeper/zk"
)

// parentMaker creates lock paths and their ancestors for one client, and
// remembers, once per client, whether the server can create container nodes
// (ZooKeeper 3.5.1+): those it deletes by itself once empty. The containers
// it makes are the cleaner's to remove (cleaner.go).
type parentMaker struct {
	c *Client

	mu      sync.Mutex
	checked bool
	ok      bool
}

// ensure creates the lock path and its missing ancestors. Nodes the
// cleaner may remove are created as containers where the server has them, so
// the server removes them too if this process dies before its cleaner runs.
// A container whose create went unanswered (reply lost, or the caller
// stopped) is settled in the background: the server never removes a
// container that never had a child, so the cleaner must know of it.
func (pm *parentMaker) ensure(ctx context.Context, lockPath string) error {
	c := pm.c
	paths := append(ancestors(lockPath), lockPath)
	r := c.retrier(ctx, nil)
	unanswered := false // the last create of paths[i] lost its reply
	checked := false    // the first node this call made was checked against nesting
	for i := 0; i < len(paths); i++ {
		p := paths[i]
		container := c.cleaner.mayRemove(p, lockPath)
		made, err := pm.create(ctx, p, lockPath, container, unanswered)
		unanswered = classify(err) == errConnection
		if made && !checked {
			checked = true
			if err := pm.checkNotNested(ctx, parentOf(p), p, lockPath); err != nil {
				return err
			}
		}
		switch {
		case err == nil:
			continue
		case classify(err) == errConnection:
			i-- // try this one again
		case errors.Is(err, zk.ErrNoNode):
			i, checked = -1, false // an ancestor vanished under us (a cleaner elsewhere): start over
		default:
			return err
		}
		if err := r.wait(); err != nil {
			if unanswered && container {
				pm.settle(p, lockPath, nil, true)
			}
			return err
		}
	}
	return nil
}

// create creates p with empty data (not null: kazoo's Semaphore reads
// a path's data as its limit, and Curator writes empty data too). A container
// is remembered with its creation zxid: the cleaner deletes only what this
// client created (cleaner.go). afterLostReply says an earlier create of p
// lost its reply: finding p then may mean this client made it. made says
// this call created p, or may have (found after a lost reply).
func (pm *parentMaker) create(ctx context.Context, p, lockPath string, container, afterLostReply bool) (made bool, err error) {
	c := pm.c
	useContainer := container && pm.containersAvailable()
	created := goCall(c, func() (string, error) {
		if useContainer {
			return c.conn.CreateContainer(p, []byte{}, zk.FlagContainer, c.opts.acl)
		}
		return c.conn.Create(p, []byte{}, zk.FlagPersistent, c.opts.acl)
	})
	_, err = await(ctx, c, created)
	if container && classify(err) == errStop {
		pm.settle(p, lockPath, created, afterLostReply) // the caller returns at its deadline
	}
	switch {
	case err == nil:
		if container {
			pm.record(ctx, p, lockPath, madeIt())
		}
		return true, nil
	case errors.Is(err, zk.ErrNodeExists):
		if container && afterLostReply {
			pm.record(ctx, p, lockPath, nil)
		}
		return afterLostReply, nil // after a lost reply, perhaps made by this client
	case useContainer && (errors.Is(err, zk.ErrUnknown) || errors.Is(err, zk.ErrAPIError)):
		// An old server: remember, and fall back to a persistent node.
		pm.mu.Lock()
		pm.ok = false
		pm.mu.Unlock()
		return pm.create(ctx, p, lockPath, false, false)
	case errors.Is(err, zk.ErrNoNode), classify(err) == errConnection, classify(err) == errStop:
		return false, err // the caller starts over, retries or stops
	default:
		return false, fmt.Errorf("zklock: create %s: %w", p, err)
	}
}

func (pm *parentMaker) containersAvailable() bool {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	if !pm.checked {
		pm.checked, pm.ok = true, true
	}
	return pm.ok
}

// record tells the cleaner of p, a container this client made (made
// holds a nil error) or may have made (made is nil: see adoptUnused). It
// reads p's creation zxid within ctx (before p gets a child, which decides
// adoption), or else in the background.
func (pm *parentMaker) record(ctx context.Context, p, lockPath string, made <-chan result[string]) {
	c := pm.c
	r := c.retrier(ctx, nil)
	for {
		stat, err := call(ctx, c, func() (*zk.Stat, error) { return c.cleaner.exists(p) })
		switch kind := classify(err); {
		case kind == errConnection && r.wait() == nil:
			continue
		case kind == errConnection || kind == errStop:
			pm.settle(p, lockPath, made, made == nil)
		case made != nil:
			c.cleaner.remember(stat, p)
		default:
			c.cleaner.adoptUnused(stat, p)
		}
		return
	}
}

// settle finds out, on a goroutine Close waits for (callers are
// tracked), whether a create of the container p made the node, when its
// caller stopped waiting for the reply or the reply was lost (made is nil),
// and tells the cleaner, which then removes it with lockPath. afterLostReply
// says an earlier create of p lost its reply: p found existing may be ours.
func (pm *parentMaker) settle(p, lockPath string, made <-chan result[string], afterLostReply bool) {
	c := pm.c
	c.inBackground(func() { c.cleaner.settle(p, lockPath, made, afterLostReply, c.cleanupRetrier(nil)) })
}

// madeIt is the outcome of a create that made its node.
func madeIt() <-chan result[string] {
	ch := make(chan result[string], 1)
	ch <- result[string]{}
	return ch
}

// settle goes on, like the removal of an abandoned queue node, until the
// outcome is known or Close has closed the connection: go-zookeeper fails
// every pending request when a connection ends, so made always answers.
func (cl *cleaner) settle(p, lockPath string, made <-chan result[string], afterLostReply bool, r *retrier) {
	err := error(zk.ErrConnectionClosed)
	if made != nil {
		err = (<-made).err
	}
	switch {
	case err == nil, classify(err) == errConnection:
	case errors.Is(err, zk.ErrNodeExists) && afterLostReply:
	default:
		return // not made, or made by someone else
	}

	for {
		stat, serr := cl.exists(p)
		switch {
		case classify(serr) == errConnection:
			if r.wait() != nil {
				return
			}
			continue
		case err == nil:
			cl.remember(stat, p)
		default:
			cl.adoptUnused(stat, p)
		}
		cl.scheduleOrClean(lockPath)
		return
	}
}
