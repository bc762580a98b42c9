package fence

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"unicode/utf8"
)

// Dialect is one store's SQL. Postgres, MySQL and SQLite are this package's;
// another store's adapter implements it and proves itself with the
// conformance suite, fence/fencetest.
type Dialect interface {
	// Name is the store's name in messages ("postgres").
	Name() string
	// Install creates the fence's table and server-side check if missing.
	// It may run any number of times, from any number of processes.
	Install(ctx context.Context, db *sql.DB) error
	// Check runs the fence in tx: it records token when it is the largest
	// seen for name, passes an equal one, and fails when a larger one has
	// written, with an error whose text holds the server-side check's
	// "zklock_fence: stale token T (seen S)" or a *StaleError. It locks the
	// fence row until tx ends. Inputs are valid when it is called.
	Check(ctx context.Context, tx *sql.Tx, name string, token int64, holder string) error
	// Seen returns the largest token recorded for name, 0 if none.
	Seen(ctx context.Context, q Querier, name string) (int64, error)
	// Param is the n-th (from 1) bind parameter's placeholder: "$1" or "?".
	Param(n int) string
}

// Querier is what Seen reads with: a *sql.DB, *sql.Tx or *sql.Conn.
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Fence checks tokens in one database. It is safe for concurrent use.
type Fence struct {
	db     *sql.DB
	d      Dialect
	holder string
}

// Option changes a Fence made by New.
type Option func(*Fence)

// WithHolder sets who is recorded beside each token (default: host:pid),
// made valid UTF-8 without NUL and cut to 255 bytes.
func WithHolder(holder string) Option { return func(f *Fence) { f.holder = holder } }

// New returns a fence on db speaking d's SQL. It does not touch db: call
// Install once (any number of times is fine) before the first Check.
func New(db *sql.DB, d Dialect, opts ...Option) *Fence {
	host, _ := os.Hostname()
	f := &Fence{db: db, d: d, holder: fmt.Sprintf("%s:%d", host, os.Getpid())}
	for _, o := range opts {
		o(f)
	}
	f.holder = cleanHolder(f.holder)
	return f
}

// cleanHolder makes a holder every store takes: valid UTF-8, no NUL, at
// most 255 bytes (cut at a character's start). It is only a record.
func cleanHolder(h string) string {
	h = strings.ReplaceAll(strings.ToValidUTF8(h, "?"), "\x00", "")
	for len(h) > 255 {
		_, size := utf8.DecodeLastRuneInString(h)
		h = h[:len(h)-size]
	}
	return h
}

// DB returns the database the fence checks in.
func (f *Fence) DB() *sql.DB { return f.db }

// Dialect returns the store's SQL.
func (f *Fence) Dialect() Dialect { return f.d }

// Install creates the fence table zklock_fence and the store's server-side
// check if they are missing or the check is of another version; a current
// installation it only reads, so callers without DDL rights may call it.
func (f *Fence) Install(ctx context.Context) error {
	if err := f.d.Install(ctx, f.db); err != nil {
		return fmt.Errorf("zklock: fence: install on %s: %w", f.d.Name(), err)
	}
	return nil
}

// Check fences tx: call it first in the transaction that does the work,
// with the holder's token (zklock.Lease.Token). It returns nil when token is
// the largest the fence named name has seen, or equal to it (the same
// holder's next write), and records it; then the fence row stays locked
// until tx ends, so no newer holder's transaction commits in between. It
// fails with an error matching ErrStale when a larger token has written or
// claimed: roll tx back, the lock is gone. Any error leaves tx unusable for
// the work: roll it back.
func (f *Fence) Check(ctx context.Context, tx *sql.Tx, name string, token int64) error {
	if err := checkInput(name, token); err != nil {
		return err
	}
	err := f.d.Check(ctx, tx, name, token, f.holder)
	if err == nil {
		return nil
	}
	if err = asStale(err, name, token); isStale(err) {
		return err
	}
	return fmt.Errorf("zklock: fence: check %q on %s: %w", name, f.d.Name(), asMissing(err))
}

// Claim records token for name in a transaction of its own: a new holder
// calls it once granted, so that every older holder's Check fails from then
// on, before the new holder has written anything. It fails as Check does.
func (f *Fence) Claim(ctx context.Context, name string, token int64) error {
	return f.inTx(ctx, func(tx *sql.Tx) error { return f.Check(ctx, tx, name, token) })
}

// Seen returns the largest token the fence named name has recorded, 0 if
// none.
func (f *Fence) Seen(ctx context.Context, name string) (int64, error) {
	if err := checkInput(name, 1); err != nil {
		return 0, err
	}
	seen, err := f.d.Seen(ctx, f.db, name)
	if err != nil {
		return 0, fmt.Errorf("zklock: fence: read %q on %s: %w", name, f.d.Name(), asMissing(err))
	}
	return seen, nil
}

// inTx runs fn in a new transaction and commits it, or rolls it back if fn
// or the commit fails.
func (f *Fence) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("zklock: fence: begin on %s: %w", f.d.Name(), err)
	}
	// Rolled back on every way out but the commit, a panic in fn included:
	// an open transaction would keep the fence row locked, and every later
	// holder waiting.
	defer tx.Rollback() //nolint:errcheck // after Commit, ErrTxDone
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("zklock: fence: commit on %s: %w", f.d.Name(), err)
	}
	return nil
}

func isStale(err error) bool {
	_, ok := err.(*StaleError)
	return ok
}
