// Package zklock provides fair distributed locks on Apache ZooKeeper.
//
// Every contender creates an ephemeral sequential node under the lock path and
// watches only the node just ahead of it, so contenders are served first come,
// first served, and a release wakes exactly one waiter. Each node records who
// created it (host, pid, client, goroutine or named owner), so a holder can
// re-enter (ReentrantMutex) and an operator can see who holds and who waits
// (Client.Contenders).
//
// # Tour
//
//	client, err := zklock.Connect(ctx, servers)   // one session; Close releases everything
//	mu, err := client.NewMutex("/locks/report")   // checks the path, no I/O
//	lease, err := mu.Acquire(ctx)                 // waits its turn; ctx's deadline is the timeout
//	token, err := lease.Token(ctx)                // fencing token for the resource
//	<-lease.Done()                                // closed the moment the lock may be gone
//	err = lease.Release(ctx)
//
// Mutex.TryAcquire takes the lock only if nobody holds or waits; Mutex.Do runs
// a function under the lock with a context cancelled on loss;
// Mutex.RunSingleton keeps exactly one process running a loop, campaigning
// again after a loss. ReentrantMutex lets its owner (goroutine, or an owner
// named with ContextWithOwner) take the lock again.
//
// On the same core: RWMutex (readers share, a writer holds alone, served in
// order so readers never starve a writer), Semaphore (at most N holders, the
// limit stored with the path), and MultiLock (several paths, all or nothing,
// taken in sorted order so overlapping sets never deadlock). Every primitive
// returns the same Lease. WithMetrics reports waits, hold times, losses,
// cleanups and retries to a Metrics hook.
//
// # Safety contract
//
// zklock never lets two sessions hold the same lock at once, as far as
// ZooKeeper's own guarantees go. But a lock held by a process can be lost while
// the process runs: its session expires during a network partition or a long
// pause, or someone deletes its node. A Lease reports this on Done and Err,
// and declares the loss before any other session could be granted the lock
// (measured from the last time ZooKeeper's leader is known to have heard from
// the client: a follower cut off from its leader still answers, so its
// answers alone prove nothing). A process that is paused cannot notice anything until it runs
// again, so a resource that must never see two writers should check the
// fencing token (Lease.Token): it grows with every new holder of a path.
//
// # Failures
//
// Every blocking call takes a context; its deadline is the timeout. No call
// waits for ever when ZooKeeper cannot be reached, context.Background()
// included: Connect has a connect timeout, TryAcquire and Contenders the
// session timeout, Release returns the loss once the lease must be presumed
// lost, Close about a second; only Acquire waits for the lock itself through
// an outage, until Close (the README's "Time bounds" has the table). An
// outage is reported as ErrUnreachable, never as ErrLocked. Whatever ends an
// Acquire early (timeout, cancel, lost reply, error, Close), the caller's
// queue node is removed: before the call returns when ZooKeeper answers, in
// the background (or by the session's end) when it does not; never left to
// block the queue for longer than a crashed holder would. Errors wrap the
// sentinels in errors.go and ZooKeeper's own errors; test them with
// errors.Is.
//
// Lock nodes use the names of Curator's InterProcessMutex and go-zookeeper's
// zk.Lock ("_c_<guid>-lock-<seq>"), and kazoo's "__lock__" nodes are counted
// too, so those libraries and zklock exclude each other on one path. RWMutex
// writes Curator's read/write names (or kazoo's, with KazooNames), Semaphore
// Curator's InterProcessSemaphoreV2 layout.
//
// # Inside
//
// An Acquire flows through a few files. acquire.go is the engine every
// primitive runs on (its contract is at its top); queue.go creates the queue node
// (with a GUID, so a create whose reply is lost is found again) and sends the
// listing in the same round trip; internal/lockpath (turn.go) decides from a
// listing whether the node holds and which one node it waits for; watch.go waits, watching only
// that node (or, for a semaphore's lease, the path's list), and proves the
// node still existed when the one ahead went before the lock is granted (from
// the order of events, or by a read);
// remove.go deletes the node on every path that gives it up (acquire.go's ask
// says what kind of node, and which turn rule, a primitive wants); leasenode.go turns
// the node into a Lease; lease.go holds a Lease's state (held, releasing,
// ended) and asks its holding, which each primitive gives it, what it
// holds; leaseloss.go holds the loss rule and the monitor that applies it. request.go runs each
// ZooKeeper request so a caller can stop waiting, sorts errors by what they
// mean, and holds the one retry policy. session.go follows the ZooKeeper
// session (events and a cross-check of the connection), the package
// internal/wire dials and times the bytes on the connection (last contact,
// the leader's word on the session, connection epochs, the create's zxid, a
// chroot's paths), lossclock.go applies the loss rule for all leases of a
// client, keepalive.go sends the syncs that keep the leader's word fresh
// while leases are held,
// servers.go checks server lists, client.go holds Connect and
// Close, options.go the options. mutex.go, reentrant.go, singleton.go,
// rwmutex.go, semaphore.go and multilock.go (with its lease made of parts) are
// the primitives on that core; watch.go also holds how each waits (on one
// node, or on the path's list for a semaphore's lease); telemetry.go is the
// observation hook; parents.go creates lock paths and cleaner.go
// removes empty ones; contenders.go lists a queue; path.go checks lock paths;
// owner.go holds the node records. The rules for lock node names (their
// styles, markers, parsing and order), the turn rules, which recipes may
// share a path, a semaphore's layout and the Metrics kinds live in the
// package internal/lockpath, which the CLI uses too.
package zklock
