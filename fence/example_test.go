package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite"

	"github.com/zklock/zklock/fence"
	"github.com/zklock/zklock/zklocktest"
)

// A holder paused past its session writes after the next holder did: the
// fence refuses it. (The locks here are zklocktest's in-memory fake; with
// zklock's real ones the code is the same.)
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "fence-example")
	defer os.RemoveAll(dir)
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_txlock=immediate&_pragma=busy_timeout(10000)")
	defer db.Close()
	_, _ = db.Exec(`CREATE TABLE reports (day TEXT PRIMARY KEY, body TEXT)`)
	f := fence.New(db, fence.SQLite)
	if err := f.Install(ctx); err != nil {
		fmt.Println(err)
		return
	}
	write := func(body string) func(tx *sql.Tx) error {
		return func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO reports VALUES ('today', ?)`, body)
			return err
		}
	}

	zk := zklocktest.New()
	a, _ := zk.NewClient().NewMutex("/jobs/report")
	b, _ := zk.NewClient().NewMutex("/jobs/report")
	leaseA, _ := a.Acquire(ctx)
	tokenA, _ := leaseA.Token(ctx)
	zk.Expire(leaseA) // A pauses past its session: the lock passes on
	leaseB, _ := b.Acquire(ctx)
	if err := f.Do(ctx, leaseB, "/jobs/report", write("B's report")); err != nil {
		fmt.Println(err)
		return
	}

	// A, thawed, writes with the token it had, as if nothing happened.
	tx, _ := db.BeginTx(ctx, nil)
	err := f.Check(ctx, tx, "/jobs/report", tokenA)
	_ = tx.Rollback()
	fmt.Println("A refused:", errors.Is(err, fence.ErrStale))
	var body string
	_ = db.QueryRow(`SELECT body FROM reports`).Scan(&body)
	fmt.Println("the report is", body)
	// Output:
	// A refused: true
	// the report is B's report
}
