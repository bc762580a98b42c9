package zklock

// This file is the connect string's chroot ("host:2181/app") as Connect sees
// it: the chroot node made if missing. The rewriting of every packet's paths
// is the wire's (internal/wire, chroot.go there).

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"
)

// ensureChroot checks, once per Connect with a chroot, that the chroot node
// exists, and creates it and its missing ancestors if not (persistent nodes,
// with the client's ACL), as lock paths' parents are created: otherwise
// every create under it would fail with "no node".
func (c *Client) ensureChroot(ctx context.Context) error {
	root := c.wire.Chroot()
	if root == "" {
		return nil
	}
	ok, err := call(ctx, c, func() (bool, error) {
		ok, _, err := c.conn.Exists("/") // the chroot itself
		return ok, err
	})
	if err != nil {
		return fmt.Errorf("zklock: checking the chroot %s: %w", root, err)
	}
	if ok {
		return nil
	}
	// Nothing else is sent before Connect returns: the raw paths are ours.
	c.wire.RawPaths(true)
	defer c.wire.RawPaths(false)
	for _, p := range append(ancestors(root), root) {
		_, err := call(ctx, c, func() (string, error) { return c.conn.Create(p, nil, zk.FlagPersistent, c.opts.acl) })
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("zklock: the chroot %s does not exist and creating %s failed: %w", root, p, err)
		}
	}
	return nil
}
