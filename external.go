package zklock

import (
	"context"
	"errors"
	"strings"
	"time"
)

// This file holds the two constructors a test double needs to hand out the
// values real primitives return: a Lease kept by something other than
// ZooKeeper (NewLease), and a Leadership on such a lease (NewLeadership).
// Package zklocktest is the test double built on them. The lease's states
// and their transitions stay those of lease.go: only the holding itself is
// the backend's.

// LeaseBackend keeps one holding of a lock outside ZooKeeper, for a Lease
// made by NewLease. It exists for test doubles, such as package zklocktest's
// in-memory locks; a program that locks with ZooKeeper never implements it.
type LeaseBackend interface {
	// Release gives the holding up: the next contender may hold. The Lease
	// calls it at most once, from the first Release made while the lease
	// holds, and never after the lease has ended. It must not call the
	// lease's end function. Whatever it returns, the lease has ended when
	// Release returns (Err: ErrReleased, unless it was lost meanwhile); a
	// non-nil error is what Lease.Release returns.
	Release(ctx context.Context) error
}

// LeaseInfo is what a Lease made by NewLease reports about its holding.
type LeaseInfo struct {
	Node     string // Lease.Node: an absolute path, the lock path and the node's name
	Sequence int64  // Lease.Sequence: the node's place in the queue of its lock path
	Token    int64  // Lease.Token: the fencing token, positive, larger for every later holder
}

// NewLease returns a held Lease whose holding is kept by b instead of
// ZooKeeper, and end, which ends it without a Release. It is for test
// doubles (package zklocktest): code under test gets a *Lease that behaves
// as a real one in every respect its holder can see: Done, Err, Token,
// Node, Sequence, Parts, and Release with its answers (nil, then
// ErrNotHeld; after a loss, the loss once, then ErrNotHeld).
//
// end(cause) ends the lease at once with cause: Done closes and Err returns
// cause from then on. cause should match ErrLockLost (a loss; nil means
// ErrLockLost), ErrHoldLimit or ErrClosed; a lease ended with ErrClosed, as
// by Client.Close, answers a later Release with ErrNotHeld. end does nothing
// once the lease has ended, and may be called from any goroutine; the
// backend ends its holding itself.
//
// Such a lease has no session and no node in ZooKeeper: Multi (and so
// Leadership.Proclaim) fails with an error matching errors.ErrUnsupported,
// and RevokeRequested never closes. NewLease panics if info.Node is not an
// absolute path or info.Token is not positive: a test double's bug.
func NewLease(b LeaseBackend, info LeaseInfo) (l *Lease, end func(cause error)) {
	i := strings.LastIndex(info.Node, "/")
	if b == nil || i < 0 || !strings.HasPrefix(info.Node, "/") || info.Token <= 0 {
		panic("zklock: NewLease needs a backend, an absolute node path and a positive token")
	}
	l = newLeaseState(nil)
	l.h = &externalHolding{l: l, b: b, path: info.Node[:i], info: info}
	return l, l.endExternal
}

// externalHolding is the holding of a lease made by NewLease: the backend
// keeps it, and ends it through the end function.
type externalHolding struct {
	l    *Lease
	b    LeaseBackend
	path string // the lock path: the node's parent
	info LeaseInfo
}

func (e *externalHolding) node() string        { return e.info.Node }
func (e *externalHolding) sequence() int64     { return e.info.Sequence }
func (e *externalHolding) deadline() time.Time { return time.Time{} }
func (e *externalHolding) listen()             {}
func (e *externalHolding) ending(error)        {}
func (e *externalHolding) err() error          { err, _ := e.l.ended(); return err }

func (e *externalHolding) token(context.Context) (int64, error) {
	if err := e.err(); err != nil {
		return 0, err
	}
	return e.info.Token, nil
}

// NewLeadership returns a Leadership that rests on l and published value,
// for test doubles of an Election (package zklocktest): Campaign returns the
// real ones. Its Done, Err and Resign are l's; Proclaim on a lease made by
// NewLease fails with an error matching errors.ErrUnsupported.
func NewLeadership(l *Lease, value string) *Leadership {
	return &Leadership{lease: l, owner: Owner{Value: value}}
}

// release is Release of a lease made by NewLease: the same states as a
// node's, with the backend's Release in place of the delete.
func (e *externalHolding) release(ctx context.Context) error {
	if err := e.l.beginRelease(); err != nil {
		return err
	}
	err := e.b.Release(ctx)
	if end, ended := e.l.finishRelease(func(error) error { return ErrReleased }); !ended {
		return end // lost while the backend released
	}
	return err
}

// endExternal is the end function NewLease returns.
func (l *Lease) endExternal(cause error) {
	if cause == nil {
		cause = ErrLockLost
	}
	l.endWith(cause, errors.Is(cause, ErrClosed)) // ErrClosed: as endOnClose, Close released it
}

// errExternal is what Multi returns on a lease made by NewLease.
func (e *externalHolding) errExternal() error {
	return &OpError{Op: "multi", Path: e.path, Err: errors.ErrUnsupported}
}
