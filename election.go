package zklock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/zklock/zklock/internal/lockpath"
)

// ErrNoLeader is returned by Election.Leader when nobody leads.
var ErrNoLeader = errors.New("zklock: no leader")

// Election elects one leader among the processes that campaign on a path,
// in the order they joined, on the same nodes as a Mutex: the leader is the
// holder of the path's lock. So an election path is shared with Curator's
// LeaderSelector (an InterProcessMutex underneath), RunSingleton on the same
// path, and Mutex. Anyone, campaigning or not, can ask who leads (Leader)
// and follow every change (Observe); the leader publishes a value (an
// address, say) with its owner record and can change it in place
// (Leadership.Proclaim).
//
// With LatchNames, the election names its nodes as Curator's LeaderLatch
// does instead, and shares its path with LeaderLatch participants (not with
// a Mutex or a LeaderSelector: a campaign refuses a path holding the other
// naming, but a Curator peer arriving later checks nothing, so keep one
// naming per path).
//
// A Leadership rests on a Lease and can be lost like any: act as leader only
// while it holds (Done, Err), and fence what the leader writes with its
// lease's Token.
type Election struct {
	c     *Client
	path  string
	style lockpath.Style
}

// An ElectionOption configures an Election.
type ElectionOption func(*Election)

// LatchNames makes an Election name its nodes as Curator's LeaderLatch does
// ("_c_<guid>-latch-<seq>"): the same queue and order, so zklock campaigners
// and LeaderLatch participants on one path elect one leader between them,
// and each sees the other's leader. Curator's LeaderSelector, on mutex
// nodes, cannot share such a path: a campaign refuses to mix the two
// (ErrIncompatible).
func LatchNames() ElectionOption {
	return func(e *Election) { e.style = lockpath.LatchStyle }
}

// NewElection returns an Election on path. It checks the path and does no I/O.
func (c *Client) NewElection(path string, opts ...ElectionOption) (*Election, error) {
	if err := validatePath(path); err != nil {
		return nil, err
	}
	e := &Election{c: c, path: path, style: lockpath.MutexStyle}
	for _, o := range opts {
		o(e)
	}
	return e, nil
}

// Path returns the election's path.
func (e *Election) Path() string { return e.path }

// Leader is who leads an election, as its node says.
type Leader struct {
	Node  string // the leader's node
	Value string // what it published (for a Curator participant: its id, the node's data)
	Owner Owner  // zklock's owner record (host, pid, ...); zero for other libraries' nodes
	Token int64  // the node's creation zxid: its leadership's fencing token
	Data  []byte // the node's raw data
}

// Leadership is a won campaign. It holds the Lease that the leader's node
// is (Lease: for its Token, guarded writes with Multi, revocation requests);
// Proclaim changes the published value, Resign ends it, and Done and Err say
// when it has ended. It is safe for concurrent use.
type Leadership struct {
	lease *Lease
	mu    sync.Mutex // serialises Proclaims
	owner Owner
}

// Lease returns the lease the leadership rests on: the leader's node. Its
// Release is Resign.
func (ld *Leadership) Lease() *Lease { return ld.lease }

// Done returns a channel closed when the leadership ends: resigned, or lost
// (the lease's Done).
func (ld *Leadership) Done() <-chan struct{} { return ld.lease.Done() }

// Err returns nil while the caller leads, and then why it stopped (the
// lease's Err): ErrReleased after Resign, or the loss.
func (ld *Leadership) Err() error { return ld.lease.Err() }

// Campaign joins the election with value and blocks until the caller leads,
// then returns its Leadership. Its bounds and failures are Mutex.Acquire's:
// a ctx deadline is the timeout, and a failed or abandoned campaign leaves
// no node behind.
func (e *Election) Campaign(ctx context.Context, value string) (*Leadership, error) {
	a := e.c.exclusive(ctx, e.path, false)
	a.style = e.style
	a.owner.Value = value
	l, err := opError("campaign", e.path)(e.c.acquire(ctx, a))
	if err != nil {
		return nil, err
	}
	return &Leadership{lease: l, owner: a.owner}, nil
}

// Proclaim changes the leader's published value in place, without an
// election: observers see the change. It is a guarded write (Lease.Multi),
// so it fails, changing nothing, once the leadership is lost, and has
// Multi's time bound.
func (ld *Leadership) Proclaim(ctx context.Context, value string) error {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	next := ld.owner
	next.Value = value
	node := ld.lease.Node()
	set := &zk.SetDataRequest{Path: node, Data: next.marshal(), Version: -1}
	if _, err := ld.lease.Multi(ctx, set); err != nil {
		return fmt.Errorf("zklock: proclaim on %s: %w", node[:strings.LastIndex(node, "/")], err)
	}
	ld.owner = next
	return nil
}

// Resign gives up the leadership: its lease's Release.
func (ld *Leadership) Resign(ctx context.Context) error { return ld.lease.Release(ctx) }

// Leader returns who leads now, or ErrNoLeader. It returns within ctx or the
// session timeout, whichever ends first (then with ErrUnreachable).
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	c := e.c
	ctx, scope, err := c.begin(ctx, true)
	if err != nil {
		return Leader{}, err
	}
	defer scope.end()
	for {
		ld, err := e.readLeader(ctx, false)
		switch {
		case errors.Is(err, errLookAgain):
			continue // the leader left as it was read
		case classify(err) == errConnection:
			return Leader{}, fmt.Errorf("%w: leader of %s: %w", ErrUnreachable, e.path, err)
		case err != nil:
			return Leader{}, err
		case ld.leader.Node == "":
			return Leader{}, fmt.Errorf("%w on %s", ErrNoLeader, e.path)
		}
		return ld.leader, nil
	}
}

// leaderRead is one reading of the leader, with the watch that fires at its
// next change when asked for.
type leaderRead struct {
	leader  Leader
	changed <-chan zk.Event
}

// readLeader lists the path and reads its first lock node. With watch set it
// leaves one watch that fires on the next change of leader: on the leader's
// node (it leaves, or proclaims), else on the path's children (someone
// joins), else on the path itself (it is created). errLookAgain: what it
// read changed meanwhile.
func (e *Election) readLeader(ctx context.Context, watch bool) (leaderRead, error) {
	c := e.c
	children, err := call(ctx, c, func() ([]string, error) {
		ch, _, err := c.conn.Children(e.path)
		return ch, err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return e.noLeader(ctx, watch, true)
	case err != nil:
		return leaderRead{}, err
	}
	nodes := lockpath.Sorted(children)
	if len(nodes) == 0 {
		return e.noLeader(ctx, watch, false)
	}
	node := e.path + "/" + nodes[0].Name
	type read struct {
		data []byte
		stat *zk.Stat
		ch   <-chan zk.Event
	}
	r, err := call(ctx, c, func() (read, error) {
		if watch {
			data, stat, ch, err := c.conn.GetW(node)
			return read{data, stat, ch}, err
		}
		data, stat, err := c.conn.Get(node)
		return read{data, stat, nil}, err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return leaderRead{}, errLookAgain
	case err != nil:
		return leaderRead{}, err
	}
	return leaderRead{leader: leaderOf(node, r.data, r.stat), changed: r.ch}, nil
}

// noLeader watches for a first contender: the path's children, or the
// path's creation when it does not exist.
func (e *Election) noLeader(ctx context.Context, watch, pathGone bool) (leaderRead, error) {
	if !watch {
		return leaderRead{}, nil
	}
	c := e.c
	ch, err := call(ctx, c, func() (<-chan zk.Event, error) {
		if pathGone {
			ok, _, ch, err := c.conn.ExistsW(e.path)
			if err == nil && ok {
				err = errLookAgain // created meanwhile
			}
			return ch, err
		}
		children, _, ch, err := c.conn.ChildrenW(e.path)
		if err == nil && len(lockpath.Sorted(children)) > 0 {
			err = errLookAgain // someone joined meanwhile
		}
		if errors.Is(err, zk.ErrNoNode) {
			err = errLookAgain // the cleaner removed the path meanwhile
		}
		return ch, err
	})
	if err != nil {
		return leaderRead{}, err
	}
	return leaderRead{changed: ch}, nil
}

// leaderOf reads a leader's node.
func leaderOf(node string, data []byte, stat *zk.Stat) Leader {
	ld := Leader{Node: node, Token: stat.Czxid, Data: data}
	if o, ok := readOwner(data, stat); ok {
		ld.Owner, ld.Value = o, o.Value
	} else if !isRevokeRequest(data) {
		ld.Value = string(data) // Curator's participant id
	}
	return ld
}
