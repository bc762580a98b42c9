package zklock

// This file creates a lock path and its missing ancestors, as container
// nodes where the server has them and the cleaner may remove them.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// containerSupport remembers, once per client, whether the server can create
// container nodes (ZooKeeper 3.5.1+): those it deletes by itself once empty.
type containerSupport struct {
	mu      sync.Mutex
	checked bool
	ok      bool
}

// ensureParents creates the lock path and its missing ancestors. Nodes the
// cleaner may remove are created as containers where the server has them, so
// the server removes them too if this process dies before its cleaner runs.
func (c *Client) ensureParents(ctx context.Context, lockPath string) error {
	paths := append(ancestors(lockPath), lockPath)
	r := c.retrier(ctx, nil)
	for i := 0; i < len(paths); i++ {
		err := c.createParent(ctx, paths[i], c.cleaner.mayRemove(paths[i], lockPath))
		switch {
		case err == nil:
			continue
		case classify(err) == errConnection:
			i-- // try this one again
		case errors.Is(err, zk.ErrNoNode):
			i = -1 // an ancestor vanished under us (a cleaner elsewhere): start over
		default:
			return err
		}
		if err := r.wait(); err != nil {
			return err
		}
	}
	return nil
}

// createParent creates p with empty data (not null: kazoo's Semaphore reads
// a path's data as its limit, and Curator writes empty data too). A node the
// cleaner may remove is remembered with its creation zxid: the cleaner
// deletes only what this client created (cleaner.go).
func (c *Client) createParent(ctx context.Context, p string, container bool) error {
	useContainer := container && c.containersAvailable()
	created := goCall(c, func() (string, error) {
		if useContainer {
			return c.conn.CreateContainer(p, []byte{}, zk.FlagContainer, c.opts.acl)
		}
		return c.conn.Create(p, []byte{}, zk.FlagPersistent, c.opts.acl)
	})
	_, err := await(ctx, c, created)
	if container && classify(err) == errStop && c.track() {
		go func() { // the caller returns at its deadline; the record needs no one waiting
			defer c.wg.Done()
			c.cleaner.awaitAbandoned(p, created)
		}()
	}
	switch {
	case err == nil:
		if container {
			c.cleaner.created(ctx, p)
		}
		return nil
	case errors.Is(err, zk.ErrNodeExists):
		return nil
	case useContainer && (errors.Is(err, zk.ErrUnknown) || errors.Is(err, zk.ErrAPIError)):
		// An old server: remember, and fall back to a persistent node.
		c.containers.mu.Lock()
		c.containers.ok = false
		c.containers.mu.Unlock()
		return c.createParent(ctx, p, false)
	case errors.Is(err, zk.ErrNoNode), classify(err) == errConnection, classify(err) == errStop:
		return err // the caller starts over, retries or stops
	default:
		return fmt.Errorf("zklock: create %s: %w", p, err)
	}
}

func (c *Client) containersAvailable() bool {
	c.containers.mu.Lock()
	defer c.containers.mu.Unlock()
	if !c.containers.checked {
		c.containers.checked, c.containers.ok = true, true
	}
	return c.containers.ok
}

// awaitAbandoned waits, at most the cleanup timeout, for a create of p its
// caller stopped waiting for: if it made the node, the cleaner must know (a
// container that never had a child is one the server never removes).
func (cl *cleaner) awaitAbandoned(p string, created <-chan result[string]) {
	t := time.NewTimer(cl.c.opts.cleanupTimeout)
	defer t.Stop()
	select {
	case r := <-created:
		if r.err == nil {
			cl.created(context.Background(), p)
		}
	case <-t.C:
	}
}
