// Package fencetest is the conformance suite of fence's stores: every
// Dialect of package fence passes it against a real server, and so must an
// adapter of your own (a Dialect for another store) before you trust it:
//
//	func TestMyStore(t *testing.T) {
//		fencetest.Run(t, fencetest.Store{Dialect: myDialect, DB: db, Empty: newEmptyDB})
//	}
//
// It writes to the fence table and to a table of its own,
// zklock_fencetest_work, with names prefixed "fencetest/", so it can run in
// a database that others use.
package fencetest

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/zklock/zklock/fence"
)

// Store is the store under test.
type Store struct {
	// Dialect is the adapter under test.
	Dialect fence.Dialect
	// DB is a database of the store that allows at least three open
	// connections. Run installs the fence in it.
	DB *sql.DB
	// Empty returns a new database of the same store with nothing
	// installed; Run closes it. It proves the errors of a missing table
	// and of a closed database.
	Empty func(t *testing.T) *sql.DB
	// Blocked returns how many sessions of the suite wait for a row lock
	// right now (count the suite's own: another session's wait would let a
	// case go on before its second transaction waits) (PostgreSQL: pg_stat_activity, InnoDB: innodb_trx, whose
	// contents are refreshed only when last read over 0.1 s ago, so that
	// Blocked must wait that long before it reads). Run orders the
	// concurrent cases by it; without it (SQLite waits in the client) Run
	// gives a blocked transaction BlockedPause to get there.
	Blocked func(ctx context.Context) (int, error)
	// Kill, given db and a connection of it before its transaction begins, returns a
	// function that ends the connection's session at the server as a
	// client's crash does (PostgreSQL: pg_terminate_backend, MySQL: KILL),
	// so that the server rolls its transaction back; KillPostgres and
	// KillMySQL are these. Without it (SQLite, in process) Run rolls back.
	Kill func(ctx context.Context, db *sql.DB, conn *sql.Conn) (func() error, error)
	// Levels are isolation levels to run the concurrent cases (OldCommitsFirst,
	// NewCommitsFirst) at, besides
	// the default; at these, a stale check may fail with the store's
	// serialization failure instead of fence.ErrStale.
	Levels []sql.IsolationLevel
}

// BlockedPause is how long Run lets a transaction block when the store has
// no Blocked.
var BlockedPause = 300 * time.Millisecond

// Run runs the conformance suite against s.
func Run(t *testing.T, s Store) {
	ctx := context.Background()
	f := fence.New(s.DB, s.Dialect, fence.WithHolder("fencetest"))
	if err := f.Install(ctx); err != nil {
		t.Fatalf("install: %v", err)
	}
	w := newWork(t, s)
	c := suite{s: s, f: f, w: w}
	t.Run("InstallTwiceAtOnce", c.installTwiceAtOnce)
	t.Run("IncreasingEqualAndStale", c.increasingEqualAndStale)
	t.Run("StaleWriteAfterNewerWrite", c.staleWriteAfterNewerWrite)
	t.Run("StaleWriteAfterNewerClaimOnly", c.staleAfterClaimOnly)
	for _, lvl := range append([]sql.IsolationLevel{sql.LevelDefault}, s.Levels...) {
		// A fence's first row (both insert it) and a row already there
		// (both lock it): stores lock the two differently.
		for _, row := range []string{"NewRow", "ExistingRow"} {
			at := row + "/" + lvl.String()
			t.Run("OldCommitsFirst/"+at, func(t *testing.T) { c.oldCommitsFirst(t, lvl, row == "ExistingRow") })
			t.Run("NewCommitsFirst/"+at, func(t *testing.T) { c.newCommitsFirst(t, lvl, row == "ExistingRow") })
		}
	}
	t.Run("NamesAreBytes", c.namesAreBytes)
	t.Run("CommitAfterTheLeaseEndedUnseen", c.commitAfterTheLeaseEndedUnseen)
	t.Run("DoRefusesALeaseEndedDuringTheWork", c.doRefusesAnEndedLease)
	t.Run("DoCommitsAndRollsBack", c.doCommitsAndRollsBack)
	t.Run("CrashBetweenWorkAndCommit", c.crashBetweenWorkAndCommit)
	t.Run("BadInput", c.badInput)
	t.Run("ClosedDatabase", c.closedDatabase)
	t.Run("MissingTable", c.missingTable)
}

type suite struct {
	s Store
	f *fence.Fence
	w *work
}
