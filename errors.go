package zklock

import (
	"errors"
	"strings"
)

// Sentinel errors. Check them with errors.Is: the errors zklock returns wrap
// them, and wrap ZooKeeper's own errors (zk.ErrNoAuth, zk.ErrSessionExpired, ...)
// with %w so those can be matched too.
var (
	// ErrInvalidPath reports a lock path ZooKeeper would reject or zklock
	// refuses to touch (relative, trailing slash, empty segment, "." or "..",
	// control characters, or anything under /zookeeper), or an op path of
	// Lease.Multi (or of a request under a chroot) ZooKeeper's client would
	// reject.
	ErrInvalidPath = errors.New("zklock: invalid lock path")
	// ErrLocked is returned by TryAcquire when someone holds the lock or
	// waits ahead of the caller.
	ErrLocked = errors.New("zklock: lock is held by someone else")
	// ErrNotHeld is returned when releasing a lease that was already released.
	ErrNotHeld = errors.New("zklock: lock is not held")
	// ErrNotOwner is returned by a reentrant release from someone who does not
	// own the lock.
	ErrNotOwner = errors.New("zklock: caller does not own the lock")
	// ErrLockLost reports a lease that ended without Release: its session
	// expired, its node was deleted by someone else, or the client lost contact
	// with ZooKeeper for so long that another holder may already exist.
	ErrLockLost = errors.New("zklock: lock lost")
	// ErrHoldLimit ends a lease that reached the hold limit (WithMaxHold):
	// zklock deleted its node, so the next waiter may hold the lock. It is not
	// ErrLockLost: the lease ended on purpose, at a moment known in advance.
	// A holder that could not run past its limit and was broken meanwhile by
	// a waiter (WithBreakOverdue) ends with it too, saying so and wrapping
	// zk.ErrNoNode.
	ErrHoldLimit = errors.New("zklock: hold limit reached")
	// ErrReleased is what Lease.Err reports after a normal Release.
	ErrReleased = errors.New("zklock: lease released")
	// ErrClosed is returned by every call on a closed Client, and ends waits
	// and leases cut short by Close.
	ErrClosed = errors.New("zklock: client closed")
	// ErrSessionExpired ends a wait whose session expired when the client is
	// configured not to re-queue (see WithRequeueOnExpiry). It wraps
	// zk.ErrSessionExpired.
	ErrSessionExpired = errors.New("zklock: session expired while waiting")
	// ErrQueueNodeDeleted ends a wait whose queue node someone else deleted
	// (an operator, a tool) when the client is configured not to re-queue.
	ErrQueueNodeDeleted = errors.New("zklock: queue node deleted by someone else while waiting")
	// ErrInvalidArgument reports an argument that cannot work (a semaphore
	// limit below 1, say); option values get ErrInvalidOption.
	ErrInvalidArgument = errors.New("zklock: invalid argument")
	// ErrInvalidOption reports an option value that cannot work.
	ErrInvalidOption = errors.New("zklock: invalid option")
	// ErrUnreachable reports a call that ended because ZooKeeper could not be
	// reached or did not answer in time: Connect found no server that gave it
	// a session, or a call's deadline passed while the client had no working
	// connection. It is joined with the cause (the last dial error, or the
	// context's error, so errors.Is(err, context.DeadlineExceeded) still
	// holds), never with ErrLocked: an outage is not contention.
	ErrUnreachable = errors.New("zklock: ZooKeeper unreachable")
)

// OpError names the call and the lock path an error came from, as
// os.PathError does for files: "zklock: acquire /locks/report: context
// deadline exceeded". Acquire, TryAcquire and Campaign of every primitive
// return their failures wrapped in one; errors.Is and errors.As see through
// it to the sentinel and ZooKeeper's error.
type OpError struct {
	Op   string // "acquire", "try-acquire", "acquire-read", ...
	Path string // the lock path (a MultiLock's: comma-separated)
	Err  error
}

func (e *OpError) Error() string {
	return "zklock: " + e.Op + " " + e.Path + ": " + strings.TrimPrefix(e.Err.Error(), "zklock: ")
}

func (e *OpError) Unwrap() error { return e.Err }

// nodeDeletedError is the loss of a lease whose node disappeared with its
// session alive. During a Release it may be the Release's own delete.
type nodeDeletedError struct{ node string }

func (e *nodeDeletedError) Error() string {
	return ErrLockLost.Error() + ": node " + e.node + " was deleted by someone else"
}

func (e *nodeDeletedError) Unwrap() error { return ErrLockLost }

func deletedByOther(node string) error { return &nodeDeletedError{node} }

func isNodeDeleted(err error) bool {
	var nd *nodeDeletedError
	return errors.As(err, &nd)
}
