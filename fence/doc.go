// Package fence makes the resource refuse a stale lock holder's writes.
//
// A lock can be lost while its holder still runs: a holder paused past its
// session (a stop-the-world pause, a frozen VM, SIGSTOP) wakes up after the
// next holder was granted and goes on writing. No lock library can stop that
// write; the store that receives it can. zklock hands every holder a fencing
// token (zklock.Lease.Token: larger for every later holder of a path), and
// this package keeps, per fence name, the largest token that has written.
//
// The rule: check the fence in the same transaction as the work, first.
// Check records the token when it is the largest seen, passes the same
// holder's repeated writes, and fails with an error matching ErrStale once a
// larger token has written or claimed. It takes the fence row's lock, so a
// stale transaction can never commit after a newer holder's: whichever of
// the two checks second waits for the first to end, then sees its token.
// Claim records a new holder's token at grant time, so that older holders
// are refused from that moment, not only from its first write. Do ties a
// zklock lease to one transaction: token, check, work, commit.
//
// Stores: PostgreSQL, MySQL and MariaDB, and SQLite, through database/sql
// with the driver of your choice. Install creates the table zklock_fence and
// a server-side check that callers in any language run in their own
// transactions: SELECT zklock_fence(name, token) in PostgreSQL,
// CALL zklock_fence(name, token, holder) in MySQL and MariaDB, and
// INSERT INTO zklock_fence_check (name, token) VALUES (...) in SQLite
// (docs/fencing.md).
//
// Time: every call returns when its ctx ends (database/sql cancels the
// statement); give it a deadline, since a database that never answers
// otherwise holds the call as long as the driver's own timeouts do. A
// holder waiting for an older holder's transaction waits as long as that
// transaction lasts: keep fenced transactions short.
//
// Isolation: the check is safe at every level each store offers; at
// PostgreSQL's REPEATABLE READ and SERIALIZABLE a stale check can fail with
// a serialization failure (SQLSTATE 40001) instead of ErrStale, which is a
// refusal all the same. SQLite transactions should take the write lock at
// BEGIN (modernc.org/sqlite: _txlock=immediate) with a busy timeout, so that
// transactions wait for one another instead of failing with SQLITE_BUSY.
package fence
