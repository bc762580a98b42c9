package fence

import (
	"context"
	"database/sql"
	"fmt"
)

// Lease is what Do needs of a lock: *zklock.Lease has both methods (so does
// a lease of zklock serve's clients, given these two).
type Lease interface {
	// Token returns the fencing token, or the lease's end.
	Token(ctx context.Context) (int64, error)
	// Err returns nil while the lease is held, then why it ended.
	Err() error
}

// Do runs fn in one fenced transaction under lease: it reads the lease's
// token, begins a transaction, checks the fence named name, runs fn, checks
// that the lease is still held, and commits. It rolls back and returns the
// error when any step fails: the lease's end (zklock.ErrLockLost, ...), an
// error matching ErrStale, fn's own, or the store's. The commit can still
// land after the lease ended unseen (a pause right before it): the fence row
// lock makes that harmless, since a newer holder's Check waits for this
// transaction to end, so the newer holder's writes still come after it.
func (f *Fence) Do(ctx context.Context, lease Lease, name string, fn func(tx *sql.Tx) error) error {
	token, err := lease.Token(ctx)
	if err != nil {
		return err
	}
	return f.inTx(ctx, func(tx *sql.Tx) error {
		if err := f.Check(ctx, tx, name, token); err != nil {
			return err
		}
		if err := fn(tx); err != nil {
			return err
		}
		if err := lease.Err(); err != nil {
			return fmt.Errorf("zklock: fence: not committed, the lease ended: %w", err)
		}
		return nil
	})
}
