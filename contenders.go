package zklock

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/go-zookeeper/zk"

	"github.com/zklock/zklock/internal/lockpath"
)

// Contender is one node in a lock's queue.
type Contender struct {
	Node     string // full path of the lock node
	Sequence int64  // its place: lower is earlier
	Token    int64  // the node's creation zxid, the fencing token if it holds
	Holder   bool   // holds: first in the queue, or a reader with no writer ahead
	Reader   bool   // a reader of a read/write lock (it shares with other readers)
	Owner    Owner  // the record zklock writes; zero for nodes of other libraries
	Data     []byte // the node's raw data, whatever library wrote it
	// RevokeRequested: someone asked this node's holder to release
	// (AskToRelease, Curator's Revoker); the request replaced the owner record.
	RevokeRequested bool
}

// Contenders lists everyone queued on the lock at path, holder first, in
// queue order, with who they are. Nodes written by Curator, go-zookeeper's
// zk.Lock and kazoo are listed too, with their raw data. A lock path that does
// not exist has no contenders. For a Semaphore's path it lists the leases,
// the first N (the limit stored with the path) as holders. It returns by
// ctx's end or the session timeout, whichever comes first.
func (c *Client) Contenders(ctx context.Context, path string) ([]Contender, error) {
	if err := validatePath(path); err != nil {
		return nil, err
	}
	ctx, scope, err := c.begin(ctx, true)
	if err != nil {
		return nil, err
	}
	defer scope.end()
	cs, err := c.contenders(ctx, path)
	if err != nil || len(cs) > 0 {
		return cs, err
	}
	limit, err := call(ctx, c, func() (int, error) {
		data, _, err := c.conn.Get(path)
		n, _ := strconv.Atoi(string(data))
		return n, err
	})
	if err != nil || limit < 1 {
		return nil, nil // not a semaphore (or gone): nobody queued
	}
	cs, err = c.contenders(ctx, path+"/"+lockpath.Leases)
	for i := range cs {
		cs[i].Holder = i < limit
	}
	return cs, err
}

// contenders lists the lock nodes under path, with their data.
func (c *Client) contenders(ctx context.Context, path string) ([]Contender, error) {
	children, err := await(ctx, c, goCall(c, func() ([]string, error) {
		ch, _, err := c.conn.Children(path)
		return ch, err
	}))
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if classify(err) == errConnection {
		return nil, fmt.Errorf("%w: list %s: %w", ErrUnreachable, path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("zklock: list %s: %w", path, err)
	}
	nodes := lockpath.Sorted(children)
	type read struct {
		data []byte
		stat *zk.Stat
	}
	// Send every read at once: go-zookeeper pipelines them on the connection.
	reads := make([]<-chan result[read], len(nodes))
	for i, n := range nodes {
		full := path + "/" + n.Name
		reads[i] = goCall(c, func() (read, error) {
			data, stat, err := c.conn.Get(full)
			return read{data, stat}, err
		})
	}
	out := make([]Contender, 0, len(nodes))
	for i, n := range nodes {
		r, err := await(ctx, c, reads[i])
		if errors.Is(err, zk.ErrNoNode) {
			continue // left the queue while we looked
		}
		if err != nil {
			return nil, fmt.Errorf("zklock: read %s/%s: %w", path, n.Name, err)
		}
		ct := Contender{Node: path + "/" + n.Name, Sequence: n.Seq, Token: r.stat.Czxid, Data: r.data, Reader: n.Shared, RevokeRequested: isRevokeRequest(r.data)}
		ct.Owner, _ = readOwner(r.data, r.stat) // not ours: the raw data says what there is
		out = append(out, ct)
	}
	for i := range out {
		out[i].Holder = i == 0 || (out[i].Reader && out[i-1].Holder && out[i-1].Reader)
	}
	return out, nil
}
