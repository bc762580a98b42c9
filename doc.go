// Package zklock provides fair distributed locks on Apache ZooKeeper.
//
// Every contender creates an ephemeral sequential node under the lock path and
// watches only the node just ahead of it, so contenders are served first come,
// first served, and a release wakes exactly one waiter. Each node records who
// created it (host, pid, client, goroutine or named owner), so a holder can
// re-enter (ReentrantMutex) and an operator can see who holds and who waits
// (Contenders).
//
// # Safety contract
//
// zklock never lets two sessions hold the same lock at once, as far as
// ZooKeeper's own guarantees go. But a lock held by a process can be lost while
// the process runs: its session expires during a network partition or a long
// pause, or someone deletes its node. A Lease reports this on Done and Err,
// and declares the loss before any other session could be granted the lock
// (measured from the last time the server is known to have heard from the
// client). A process that is paused cannot notice anything until it runs
// again, so a resource that must never see two writers should check the
// fencing token (Lease.Token): it grows with every new holder of a path.
//
// # Failures
//
// Every blocking call takes a context; its deadline is the timeout. Whatever
// ends an Acquire early (timeout, cancel, lost reply, error, Close), the
// caller's queue node is removed, never left to block the queue until the
// session dies. Errors wrap the sentinels in errors.go and ZooKeeper's own
// errors; test them with errors.Is.
//
// Lock nodes use the names of Curator's InterProcessMutex and go-zookeeper's
// zk.Lock ("_c_<guid>-lock-<seq>"), and kazoo's "__lock__" nodes are counted
// too, so those libraries and zklock exclude each other on one path.
package zklock
