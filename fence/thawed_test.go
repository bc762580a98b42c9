package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/fence"
	"github.com/zklock/zklock/zktest"
)

// TestThawedHolderIsRefused is the failure the fence closes, on each store:
// holder A is cut off from ZooKeeper (as a paused process is) after it
// decided to write; its session expires and B is granted and writes. A's
// write, when it comes, overwrites B's without the fence; with it, it is
// refused.
func TestThawedHolderIsRefused(t *testing.T) {
	zk := sharedZooKeeper(t)
	for _, st := range stores() {
		t.Run(st.name, func(t *testing.T) {
			db := st.db(t)
			f := fence.New(db, st.d)
			ctx := context.Background()
			if err := f.Install(ctx); err != nil {
				t.Fatal(err)
			}
			mustExec(t, db, `CREATE TABLE IF NOT EXISTS thawed_work (k VARCHAR(64) PRIMARY KEY, v BIGINT NOT NULL)`)
			mustExec(t, db, `DELETE FROM thawed_work WHERE k = `+st.d.Param(1), st.name)
			mustExec(t, db, `INSERT INTO thawed_work (k, v) VALUES (`+st.d.Param(1)+`, 0)`, st.name)
			write := func(tx *sql.Tx, token int64) error {
				_, err := tx.ExecContext(ctx, `UPDATE thawed_work SET v = `+st.d.Param(1)+` WHERE k = `+st.d.Param(2), token, st.name)
				return err
			}
			a, b := thawedEpisode(t, zk, "/fence-thawed/"+st.name)
			tokenA, tokenB := a.token, b.token

			if err := f.Do(ctx, b.lease, st.name, func(tx *sql.Tx) error { return write(tx, tokenB) }); err != nil {
				t.Fatalf("B's fenced write: %v", err)
			}
			// A, thawed, never asks its lease again: it writes as it meant to.
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = f.Check(ctx, tx, st.name, tokenA)
			_ = tx.Rollback()
			var stale *fence.StaleError
			if !errors.As(err, &stale) || stale.Seen != tokenB {
				t.Fatalf("A's fenced write after B's: %v, want fence.ErrStale seeing B's token %d", err, tokenB)
			}
			if v := value(t, db, st); v != tokenB {
				t.Fatalf("after A's refused write the row holds %d, want B's token %d", v, tokenB)
			}
			// The same write without the fence: it lands on top of B's.
			tx, err = db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := write(tx, tokenA); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if v := value(t, db, st); v != tokenA {
				t.Fatalf("A's unfenced write: the row holds %d, want A's token %d", v, tokenA)
			}
			t.Logf("%s: A (token %d) refused by the fence after B (token %d) wrote; unfenced, A overwrote B", st.name, tokenA, tokenB)
		})
	}
}

type holder struct {
	lease *zklock.Lease
	token int64
}

// thawedEpisode: A holds path through a proxy, the proxy stalls, and B is
// granted once A's session has expired.
func thawedEpisode(t *testing.T, zk *zktest.Cluster, path string) (a, b holder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	proxy := zktest.NewProxy(t, zk.Addrs()...)
	a = take(ctx, t, []string{proxy.Addr()}, path)
	proxy.Stall()
	b = take(ctx, t, zk.Addrs(), path)
	if b.token <= a.token {
		t.Fatalf("B's token %d is not larger than A's %d", b.token, a.token)
	}
	return a, b
}

// take connects a client of its own and acquires path.
func take(ctx context.Context, t *testing.T, servers []string, path string) holder {
	t.Helper()
	c, err := zklock.Connect(ctx, servers, zklock.WithSessionTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	m, err := c.NewMutex(path)
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	token, err := l.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return holder{lease: l, token: token}
}

func mustExec(t *testing.T, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func value(t *testing.T, db *sql.DB, st store) int64 {
	t.Helper()
	var v int64
	if err := db.QueryRow(`SELECT v FROM thawed_work WHERE k = `+st.d.Param(1), st.name).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}
