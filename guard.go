package zklock

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/zklock/zklock/internal/wire"
)

// Multi runs ops (go-zookeeper's *zk.CreateRequest, *zk.SetDataRequest,
// *zk.DeleteRequest, *zk.CheckVersionRequest) atomically, and only while
// the lease holds: the transaction starts with a check that the lease's node
// (each part's, for a MultiLock) still exists, so ZooKeeper applies all of
// it or none, and none once the node is gone, whoever removed it and
// however late the request arrives. The node's existence is the holding
// (its name carries the lease's GUID and it belongs to the lease's session),
// so the check ignores its version: a revocation request or Proclaim writes
// to the node without ending the lease.
//
// Every op's path is checked first, as ZooKeeper's client checks a single
// call's (go-zookeeper does not check a multi's): an invalid one, or an op
// of another type, sends nothing and returns ErrInvalidPath or
// ErrInvalidArgument, the lease untouched. Under a chroot, a path such as
// "-b" would otherwise name a sibling of the chroot.
//
// It returns the responses to ops (the check's are left out). A lease that
// has ended, or must be presumed lost by now, sends nothing and returns its
// end. When ZooKeeper refuses the write because the node is gone, the lease
// ends with that loss and the error matches ErrLockLost; any other refusal
// (a version that does not match, a node that exists) leaves the lease
// held and is returned as ZooKeeper gave it, wrapped. If the lease ends or
// ctx ends while the request is in flight, Multi returns at once with that
// error: the write's outcome is then unknown (it was applied only if it
// reached ZooKeeper while the node existed). It waits at most ctx and, when
// ZooKeeper does not answer, until the lease must be presumed lost.
func (l *Lease) Multi(ctx context.Context, ops ...any) ([]zk.MultiResponse, error) {
	if err := checkOps(ops); err != nil {
		return nil, err
	}
	if e, ok := l.h.(*externalHolding); ok {
		return nil, e.errExternal()
	}
	if err := l.Err(); err != nil {
		return nil, err
	}
	parts := l.Parts()
	all := make([]any, 0, len(parts)+len(ops))
	for _, p := range parts {
		all = append(all, &zk.CheckVersionRequest{Path: p.Node(), Version: -1})
	}
	all = append(all, ops...)
	c := l.c
	if !c.track() {
		return nil, ErrClosed
	}
	defer c.wg.Done()
	var res []zk.MultiResponse
	var err error
	select {
	case r := <-goCall(c, func() ([]zk.MultiResponse, error) { return c.conn.Multi(all...) }):
		res, err = r.v, r.err
	case <-ctx.Done():
		return nil, unknownOutcome(l.Node(), c.ctxErr(ctx))
	case <-l.done:
		return nil, unknownOutcome(l.Node(), l.Err())
	case <-c.closing:
		return nil, unknownOutcome(l.Node(), ErrClosed)
	}
	if err == nil {
		return res[len(parts):], nil
	}
	if lost := guardLoss(parts, res, err); lost != nil {
		return nil, lost
	}
	if classify(err) == errConnection {
		return nil, unknownOutcome(l.Node(), fmt.Errorf("%w: %w", ErrUnreachable, err))
	}
	if len(res) > len(parts) {
		res = res[len(parts):]
	}
	return res, fmt.Errorf("zklock: guarded write under %s: %w", l.Node(), err)
}

// checkOps checks the path of every op of a guarded write.
func checkOps(ops []any) error {
	for i, op := range ops {
		p, seq, ok := opPath(op)
		if !ok {
			return fmt.Errorf("%w: guarded write op %d is %T, not a non-nil *zk.CreateRequest, *zk.SetDataRequest, *zk.DeleteRequest or *zk.CheckVersionRequest",
				ErrInvalidArgument, i, op)
		}
		if err := validateOpPath(p, seq); err != nil {
			return fmt.Errorf("zklock: guarded write op %d: %w", i, err)
		}
	}
	return nil
}

// opPath returns the path of a guarded write's op and whether it is a
// sequential create's; ok is false for a nil op or another type.
func opPath(op any) (p string, seq, ok bool) {
	switch o := op.(type) {
	case *zk.CreateRequest:
		if o != nil {
			return o.Path, wire.SequentialFlags(o.Flags), true
		}
	case *zk.SetDataRequest:
		if o != nil {
			return o.Path, false, true
		}
	case *zk.DeleteRequest:
		if o != nil {
			return o.Path, false, true
		}
	case *zk.CheckVersionRequest:
		if o != nil {
			return o.Path, false, true
		}
	}
	return "", false, false
}

// guardLoss turns a refused guarded write whose check failed into the
// loss it proves, ending the part whose node is gone; nil if the checks
// passed (another op was refused).
func guardLoss(parts []*Lease, res []zk.MultiResponse, err error) error {
	if classify(err) == errSession {
		for _, p := range parts {
			p.lose(p.c.sessionLoss())
		}
		return fmt.Errorf("zklock: guarded write not applied: %w", parts[0].c.sessionLoss())
	}
	for i, p := range parts {
		if i < len(res) && errors.Is(res[i].Error, zk.ErrNoNode) {
			lost := deletedByOther(p.Node())
			if p.onNode().q.goneReason() == errSessionOver {
				lost = p.c.sessionLoss()
			}
			p.lose(lost)
			if end := p.Err(); end != nil {
				lost = end // an earlier loss, or the Release under way
			}
			return fmt.Errorf("zklock: guarded write not applied: %w", lost)
		}
	}
	return nil
}

// unknownOutcome is the error of a guarded write nobody waited out.
func unknownOutcome(node string, err error) error {
	return fmt.Errorf("zklock: guarded write under %s: outcome unknown (applied only if it reached ZooKeeper while the node existed): %w", node, err)
}
