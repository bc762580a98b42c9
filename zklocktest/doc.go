// Package zklocktest is an in-memory stand-in for zklock's exclusive locks
// and elections, for unit tests of code that uses them: no ZooKeeper, no
// Java, every step in microseconds. Code written against zklock.Locker
// takes a zklocktest Mutex as it takes a zklock Mutex, and gets real
// *zklock.Lease values back (made with zklock.NewLease), so its handling of
// Done, Err, Token and Release is the code that will run in production.
//
//	srv := zklocktest.New()
//	mu, _ := srv.NewClient().NewMutex("/locks/report") // a zklock.Locker
//	lease, _ := mu.Acquire(ctx)
//	srv.Lose(lease) // as if someone deleted the node: Done closes, Err matches zklock.ErrLockLost
//
// Server.Holder(path) finds the lease of a holder that the code under test
// keeps to itself, so srv.Lose(srv.Holder(path)) takes it away.
//
// # What it models
//
// Each behaviour below is checked by one conformance suite that runs both
// against this package and against real ZooKeeper (zklocktest/conformance):
//
//   - Acquire waits its turn, first come first served across all clients of
//     a Server; a ctx deadline is the timeout, and the error matches
//     context.DeadlineExceeded (or context.Canceled) inside a *zklock.OpError.
//     A waiter that gives up leaves no trace: the queue behind it moves up.
//   - TryAcquire never waits: zklock.ErrLocked when anyone holds or waits.
//   - Leases: Node (under the lock path), Sequence (growing along the
//     queue), Token (positive, strictly larger for every later holder of a
//     path, losses and re-queues included); Release returns nil, then
//     zklock.ErrNotHeld; Err is nil while held, then zklock.ErrReleased.
//   - Server.Lose: the lease's node deleted by someone else. Done closes,
//     Err and the first Release match zklock.ErrLockLost, a later Release
//     says zklock.ErrNotHeld, and the next waiter holds.
//   - Server.Expire: the session of the lease's client expired. Every lease
//     of that client is lost (zklock.ErrLockLost), each before anyone else
//     is granted its lock; the client's waiting Acquires go to the back of
//     their queues, as zklock does with WithRequeueOnExpiry (the default).
//   - Client.Close: its leases end with zklock.ErrClosed (a later Release
//     says zklock.ErrNotHeld), its waiting Acquires return zklock.ErrClosed,
//     and so does every later call.
//   - Client.Contenders: the queue, holder first.
//   - The unhappy paths, as zklock answers them: a ctx that has ended
//     (cancelled or past its deadline) makes Acquire, TryAcquire, Campaign,
//     Contenders and Leader return its error and change nothing; Observe's
//     channel closes without a value; Release and Resign of a held lease
//     end it (Err zklock.ErrReleased, the next waiter holds) and return
//     ctx's error; Token still answers. An invalid path is
//     zklock.ErrInvalidPath in NewMutex, NewElection and Contenders. On a
//     closed client every call fails with zklock.ErrClosed (the
//     constructors, which do no I/O, still build). A second Release or
//     Resign says zklock.ErrNotHeld. The conformance suite checks each of
//     these in one table, call by call and condition by condition.
//   - Elections on the same queue as mutexes: Campaign waits its turn and
//     returns a *zklock.Leadership (Done, Err, Resign, Lease); Leader returns
//     the holder's node, value and token, or zklock.ErrNoLeader; Observe
//     sends the leader now and after every change (a zero Leader when nobody
//     leads), holding only the latest.
//
// # What it does not model
//
// Sessions and time (a session timeout, the 80 % loss rule, a paused
// process, pings), network faults and outages (zklock.ErrUnreachable is never
// returned), the exact text of errors (match them with errors.Is), owner
// records (Leader.Owner and Leader.Data are zero, and a Mutex is not
// reentrant), ReentrantMutex, RWMutex, Semaphore and MultiLock, Do and
// RunSingleton, Job, WithMaxHold, revocation (RevokeRequested never closes),
// guarded writes (Lease.Multi and Leadership.Proclaim fail with an error
// matching errors.ErrUnsupported), Curator, kazoo and zk.Lock on a shared
// path, the cleaner, metrics, the rule that no lock path lies inside
// another (zklock.ErrNestedPath: the fake grants P/x while P is held),
// and what a real ZooKeeper does when a deleted
// node's holder learns late: here a lost lease's Done always closes before
// the next holder is granted; with real ZooKeeper that is guaranteed for an
// expired session, not for a node deleted by hand. Test those against real
// ZooKeeper with package zktest.
package zklocktest
