package fencetest

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/zklock/zklock/fence"
)

// work is the table the suite's holders write to: one row per case, whose
// value is the token of the last holder that wrote it.
type work struct {
	s Store
}

func newWork(t *testing.T, s Store) *work {
	t.Helper()
	_, err := s.DB.ExecContext(context.Background(),
		`CREATE TABLE IF NOT EXISTS zklock_fencetest_work (k VARCHAR(255) NOT NULL PRIMARY KEY, v BIGINT NOT NULL)`)
	if err != nil {
		t.Fatalf("create zklock_fencetest_work: %v", err)
	}
	return &work{s: s}
}

// name returns the case's fence and work row, both fresh.
func (w *work) name(t *testing.T) string {
	t.Helper()
	name := "fencetest/" + strings.ReplaceAll(t.Name(), "/", ".")
	ctx := context.Background()
	p := w.s.Dialect.Param
	for _, q := range []string{
		`DELETE FROM zklock_fencetest_work WHERE k = ` + p(1),
		`DELETE FROM zklock_fence WHERE name = ` + p(1),
	} {
		if _, err := w.s.DB.ExecContext(ctx, q, name); err != nil {
			t.Fatalf("reset %q: %v", name, err)
		}
	}
	if _, err := w.s.DB.ExecContext(ctx, `INSERT INTO zklock_fencetest_work (k, v) VALUES (`+p(1)+`, 0)`, name); err != nil {
		t.Fatalf("insert %q: %v", name, err)
	}
	return name
}

// reset removes the fences named.
func (c *suite) reset(t *testing.T, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := c.s.DB.ExecContext(context.Background(), `DELETE FROM zklock_fence WHERE name = `+c.s.Dialect.Param(1), name); err != nil {
			t.Fatalf("reset %q: %v", name, err)
		}
	}
}

// write sets the case's row to v in tx.
func (w *work) write(ctx context.Context, tx *sql.Tx, name string, v int64) error {
	p := w.s.Dialect.Param
	_, err := tx.ExecContext(ctx, `UPDATE zklock_fencetest_work SET v = `+p(1)+` WHERE k = `+p(2), v, name)
	return err
}

// value is the row's committed value.
func (w *work) value(t *testing.T, name string) int64 {
	t.Helper()
	var v int64
	err := w.s.DB.QueryRowContext(context.Background(),
		`SELECT v FROM zklock_fencetest_work WHERE k = `+w.s.Dialect.Param(1), name).Scan(&v)
	if err != nil {
		t.Fatalf("read %q: %v", name, err)
	}
	return v
}

// fencedWrite is a holder's whole transaction: check, write its token,
// commit.
func (c *suite) fencedWrite(ctx context.Context, name string, token int64) error {
	return c.fencedWriteAt(ctx, sql.LevelDefault, name, token)
}

const blockedPoll = 10 * time.Millisecond

// untilBlocked returns once a session waits for a row lock (the case's
// second transaction: the cases run one at a time), or after BlockedPause
// where the store cannot tell.
func (c *suite) untilBlocked(t *testing.T, done <-chan error) {
	t.Helper()
	if c.s.Blocked == nil {
		select {
		case err := <-done:
			t.Fatalf("the second transaction did not wait for the first: %v", err)
		case <-time.After(BlockedPause):
		}
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := c.s.Blocked(context.Background())
		if err != nil {
			t.Fatalf("blocked sessions: %v", err)
		}
		if n > 0 {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("the second transaction did not wait for the first: %v", err)
		case <-time.After(blockedPoll):
		}
		if time.Now().After(deadline) {
			t.Fatal("the second transaction never waited for the row lock")
		}
	}
}

func mustSeen(t *testing.T, f *fence.Fence, name string, want int64) {
	t.Helper()
	got, err := f.Seen(context.Background(), name)
	if err != nil {
		t.Fatalf("Seen(%q): %v", name, err)
	}
	if got != want {
		t.Fatalf("Seen(%q) = %d, want %d", name, got, want)
	}
}

func mustValue(t *testing.T, w *work, name string, want int64) {
	t.Helper()
	if got := w.value(t, name); got != want {
		t.Fatalf("work row %q = %d, want %d", name, got, want)
	}
}
