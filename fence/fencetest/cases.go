package fencetest

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"

	"github.com/zklock/zklock/fence"
)

func (c *suite) installTwiceAtOnce(t *testing.T) {
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = c.f.Install(context.Background()) }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("install beside another: %v", err)
		}
	}
}

func (c *suite) increasingEqualAndStale(t *testing.T) {
	ctx, name := context.Background(), c.w.name(t)
	for _, token := range []int64{5, 5, 7, 7} {
		if err := c.fencedWrite(ctx, name, token); err != nil {
			t.Fatalf("write with token %d: %v", token, err)
		}
	}
	for _, token := range []int64{5, 6} {
		err := c.fencedWrite(ctx, name, token)
		var stale *fence.StaleError
		if !errors.As(err, &stale) || !errors.Is(err, fence.ErrStale) {
			t.Fatalf("write with token %d after 7: %v, want fence.ErrStale", token, err)
		}
		if stale.Name != name || stale.Token != token || stale.Seen != 7 {
			t.Fatalf("stale error %+v, want name %q token %d seen 7", stale, name, token)
		}
	}
	mustSeen(t, c.f, name, 7)
	mustValue(t, c.w, name, 7)
}

func (c *suite) staleWriteAfterNewerWrite(t *testing.T) {
	ctx, name := context.Background(), c.w.name(t)
	must(t, c.fencedWrite(ctx, name, 5))
	must(t, c.fencedWrite(ctx, name, 9))
	if err := c.fencedWrite(ctx, name, 5); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("the old holder's write after the new one's: %v, want fence.ErrStale", err)
	}
	mustValue(t, c.w, name, 9)
}

func (c *suite) staleAfterClaimOnly(t *testing.T) {
	ctx, name := context.Background(), c.w.name(t)
	must(t, c.fencedWrite(ctx, name, 5))
	must(t, c.f.Claim(ctx, name, 9))
	if err := c.fencedWrite(ctx, name, 5); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("the old holder's write after the new one's claim: %v, want fence.ErrStale", err)
	}
	mustValue(t, c.w, name, 5)
	mustSeen(t, c.f, name, 9)
}

// oldCommitsFirst: the old holder's transaction checked first; the new
// holder's check waits for it, and the old write lands before the new one.
// Above the default level the new holder may fail with the store's
// serialization failure, and succeed when it retries.
func (c *suite) oldCommitsFirst(t *testing.T, lvl sql.IsolationLevel, existing bool) {
	ctx, name := context.Background(), c.w.name(t)
	done := c.race(t, lvl, name, existing, 5, 9)
	if err := <-done; err != nil && lvl != sql.LevelDefault && !errors.Is(err, fence.ErrStale) {
		// A serialization failure: retried, as any transaction at this level.
		must(t, c.fencedWriteAt(ctx, lvl, name, 9))
	} else if err != nil {
		t.Fatalf("the new holder, after the old one committed: %v", err)
	}
	mustValue(t, c.w, name, 9)
	mustSeen(t, c.f, name, 9)
}

// newCommitsFirst: the new holder's transaction checked first; the old
// holder's check waits for it, then is refused.
func (c *suite) newCommitsFirst(t *testing.T, lvl sql.IsolationLevel, existing bool) {
	name := c.w.name(t)
	err := <-c.race(t, lvl, name, existing, 9, 5)
	if err == nil {
		t.Fatal("the old holder committed after the new one")
	}
	if lvl == sql.LevelDefault && !errors.Is(err, fence.ErrStale) {
		t.Fatalf("the old holder after the new one committed: %v, want fence.ErrStale", err)
	}
	mustValue(t, c.w, name, 9)
	mustSeen(t, c.f, name, 9)
}

// race runs two holders' transactions at lvl on name (with a row already
// there if existing): the first checks and writes first, the second's
// check waits for it, and the first commits. It returns the second's end.
func (c *suite) race(t *testing.T, lvl sql.IsolationLevel, name string, existing bool, first, second int64) <-chan error {
	ctx := context.Background()
	if existing {
		must(t, c.fencedWrite(ctx, name, 3))
	}
	tx := c.begin(t, lvl)
	must(t, c.f.Check(ctx, tx, name, first))
	must(t, c.w.write(ctx, tx, name, first))
	done := make(chan error, 1)
	go func() { done <- c.fencedWriteAt(ctx, lvl, name, second) }()
	c.untilBlocked(t, done)
	must(t, tx.Commit())
	return done
}

// commitAfterTheLeaseEndedUnseen: a transaction begun under a live lease
// commits after the lease ended (its holder paused before the commit) and
// the new holder claimed meanwhile: the claim waits for it, so the old
// write lands first and every later one of the old holder is refused.
func (c *suite) commitAfterTheLeaseEndedUnseen(t *testing.T) {
	ctx, name := context.Background(), c.w.name(t)
	old := c.begin(t, sql.LevelDefault)
	must(t, c.f.Check(ctx, old, name, 5))
	must(t, c.w.write(ctx, old, name, 5))
	done := make(chan error, 1)
	go func() { done <- c.f.Claim(ctx, name, 9) }()
	c.untilBlocked(t, done)
	must(t, old.Commit())
	if err := <-done; err != nil {
		t.Fatalf("the new holder's claim: %v", err)
	}
	if err := c.fencedWrite(ctx, name, 5); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("the old holder's next write: %v, want fence.ErrStale", err)
	}
	mustValue(t, c.w, name, 5)
	mustSeen(t, c.f, name, 9)
}

// namesAreBytes: names that differ only in case, a trailing space or an
// accent are different fences (lock paths are), and any UTF-8 name works.
func (c *suite) namesAreBytes(t *testing.T) {
	ctx := context.Background()
	base := "fencetest/" + t.Name()
	for _, pair := range [][2]string{{"/jobs/Report", "/jobs/report"}, {"/jobs/a", "/jobs/a "}, {"/jobs/é", "/jobs/e"}, {"/jobs/ключ", "/jobs/鍵"}} {
		a, b := base+pair[0], base+pair[1]
		c.reset(t, a, b)
		must(t, c.f.Claim(ctx, a, 9))
		if err := c.f.Claim(ctx, b, 5); err != nil {
			t.Fatalf("fence %q after %q had token 9: %v, want its own fence", b, a, err)
		}
		mustSeen(t, c.f, a, 9)
		mustSeen(t, c.f, b, 5)
	}
}

func (c *suite) doRefusesAnEndedLease(t *testing.T) {
	ctx, name := context.Background(), c.w.name(t)
	must(t, c.fencedWrite(ctx, name, 3))
	lost := errors.New("lease lost")
	l := &testLease{token: 5}
	err := c.f.Do(ctx, l, name, func(tx *sql.Tx) error {
		l.end(lost)
		return c.w.write(ctx, tx, name, 5)
	})
	if !errors.Is(err, lost) {
		t.Fatalf("Do with the lease ended during fn: %v, want the lease's end", err)
	}
	mustValue(t, c.w, name, 3)
	mustSeen(t, c.f, name, 3)
	if err := c.f.Do(ctx, l, name, func(*sql.Tx) error { return nil }); !errors.Is(err, lost) {
		t.Fatalf("Do with an ended lease: %v, want the lease's end", err)
	}
}

func (c *suite) doCommitsAndRollsBack(t *testing.T) {
	ctx, name := context.Background(), c.w.name(t)
	l := &testLease{token: 5}
	must(t, c.f.Do(ctx, l, name, func(tx *sql.Tx) error { return c.w.write(ctx, tx, name, 5) }))
	mustValue(t, c.w, name, 5)
	failed := errors.New("the work failed")
	newer := &testLease{token: 8}
	err := c.f.Do(ctx, newer, name, func(tx *sql.Tx) error {
		if err := c.w.write(ctx, tx, name, 8); err != nil {
			return err
		}
		return failed
	})
	if !errors.Is(err, failed) {
		t.Fatalf("Do whose fn failed: %v, want fn's error", err)
	}
	mustValue(t, c.w, name, 5)
	mustSeen(t, c.f, name, 5)
	err = c.f.Do(ctx, &testLease{token: 4}, name, func(*sql.Tx) error { return nil })
	if !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Do under an older token: %v, want fence.ErrStale", err)
	}
}

// crashBetweenWorkAndCommit: the holder's session dies after its check and
// work, before the commit. Nothing of it stays: not the work, not the token
// (a holder between the old token and the dead one's still writes).
func (c *suite) crashBetweenWorkAndCommit(t *testing.T) {
	ctx, name := context.Background(), c.w.name(t)
	must(t, c.fencedWrite(ctx, name, 5))
	conn, err := c.s.DB.Conn(ctx)
	must(t, err)
	defer conn.Close()
	kill := func() error { return nil }
	if c.s.Kill != nil {
		kill, err = c.s.Kill(ctx, c.s.DB, conn)
		must(t, err)
	}
	tx, err := conn.BeginTx(ctx, nil)
	must(t, err)
	must(t, c.f.Check(ctx, tx, name, 9))
	must(t, c.w.write(ctx, tx, name, 9))
	must(t, kill())
	_ = tx.Rollback() // without Kill, what a crash comes to; with it, fails
	must(t, c.fencedWrite(ctx, name, 7))
	mustValue(t, c.w, name, 7)
	mustSeen(t, c.f, name, 7)
}

func (c *suite) badInput(t *testing.T) {
	ctx, name := context.Background(), c.w.name(t)
	long := string(make([]byte, 256))
	for _, bad := range []string{"", long, "a\x00b", "\xff"} {
		if err := c.f.Claim(ctx, bad, 5); !errors.Is(err, fence.ErrBadName) {
			t.Errorf("Claim(%q): %v, want fence.ErrBadName", bad, err)
		}
		if _, err := c.f.Seen(ctx, bad); !errors.Is(err, fence.ErrBadName) {
			t.Errorf("Seen(%q): %v, want fence.ErrBadName", bad, err)
		}
	}
	for _, bad := range []int64{0, -1} {
		if err := c.fencedWrite(ctx, name, bad); !errors.Is(err, fence.ErrBadToken) {
			t.Errorf("write with token %d: %v, want fence.ErrBadToken", bad, err)
		}
		if err := c.f.Do(ctx, &testLease{token: bad}, name, func(*sql.Tx) error { return nil }); !errors.Is(err, fence.ErrBadToken) {
			t.Errorf("Do with token %d: %v, want fence.ErrBadToken", bad, err)
		}
	}
	mustSeen(t, c.f, name, 0)
	mustValue(t, c.w, name, 0)
}

func (c *suite) closedDatabase(t *testing.T) {
	db := c.s.Empty(t)
	must(t, db.Close())
	f := fence.New(db, c.s.Dialect)
	ctx := context.Background()
	if err := f.Install(ctx); err == nil {
		t.Error("Install on a closed database: no error")
	}
	if err := f.Claim(ctx, "fencetest/closed", 5); err == nil {
		t.Error("Claim on a closed database: no error")
	}
	if _, err := f.Seen(ctx, "fencetest/closed"); err == nil {
		t.Error("Seen on a closed database: no error")
	}
}

func (c *suite) missingTable(t *testing.T) {
	db := c.s.Empty(t)
	defer db.Close()
	f := fence.New(db, c.s.Dialect)
	ctx := context.Background()
	if err := f.Claim(ctx, "fencetest/missing", 5); !errors.Is(err, fence.ErrNotInstalled) {
		t.Errorf("Claim with no fence installed: %v, want fence.ErrNotInstalled", err)
	}
	if _, err := f.Seen(ctx, "fencetest/missing"); !errors.Is(err, fence.ErrNotInstalled) {
		t.Errorf("Seen with no fence installed: %v, want fence.ErrNotInstalled", err)
	}
	must(t, f.Install(ctx))
	mustSeen(t, f, "fencetest/missing", 0)
}

func (c *suite) begin(t *testing.T, lvl sql.IsolationLevel) *sql.Tx {
	t.Helper()
	tx, err := c.s.DB.BeginTx(context.Background(), &sql.TxOptions{Isolation: lvl})
	must(t, err)
	t.Cleanup(func() { _ = tx.Rollback() })
	return tx
}

func (c *suite) fencedWriteAt(ctx context.Context, lvl sql.IsolationLevel, name string, token int64) error {
	tx, err := c.s.DB.BeginTx(ctx, &sql.TxOptions{Isolation: lvl})
	if err != nil {
		return err
	}
	if err := c.f.Check(ctx, tx, name, token); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := c.w.write(ctx, tx, name, token); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// testLease is a lease the case ends when it wants.
type testLease struct {
	mu    sync.Mutex
	token int64
	err   error
}

func (l *testLease) Token(context.Context) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.token, l.err
}

func (l *testLease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *testLease) end(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.err = err
}
