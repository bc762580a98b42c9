package fence_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/zklock/zklock/fence"
)

// TestSQLiteCrashBetweenWorkAndCommit: a holder process is killed (SIGKILL)
// after its check and its work, before the commit. Its token was never
// recorded: a holder between the old token and the dead one's still writes.
// (The conformance suite kills the server's session for PostgreSQL and
// MariaDB; SQLite runs in the holder's process, so the holder dies here.)
func TestSQLiteCrashBetweenWorkAndCommit(t *testing.T) {
	if path := os.Getenv("FENCE_CRASH_DB"); path != "" {
		crashingHolder(t, path)
		return
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "crash.db")
	db := openSQLite(t, path)
	f := fence.New(db, fence.SQLite)
	if err := f.Install(ctx); err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, `CREATE TABLE work (k TEXT PRIMARY KEY, v INTEGER)`)
	mustExec(t, db, `INSERT INTO work VALUES ('k', 5)`)
	if err := f.Claim(ctx, "crash", 5); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestSQLiteCrashBetweenWorkAndCommit$")
	cmd.Env = append(os.Environ(), "FENCE_CRASH_DB="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "ready" {
				ready <- true
			}
		}
		close(ready)
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("the holder exited before its work was done")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the holder never got its work done")
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()

	if err := f.Claim(ctx, "crash", 7); err != nil {
		t.Fatalf("a holder with token 7 after the dead one's 9 was never committed: %v", err)
	}
	var v int64
	if err := db.QueryRow(`SELECT v FROM work`).Scan(&v); err != nil || v != 5 {
		t.Fatalf("work = %d (%v), want 5: the dead holder's work must not stay", v, err)
	}
}

// crashingHolder checks token 9, does its work, says ready and waits to be
// killed.
func crashingHolder(t *testing.T, path string) {
	db := openSQLite(t, path)
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := fence.New(db, fence.SQLite).Check(ctx, tx, "crash", 9); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE work SET v = 9`); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("ready\n")
	time.Sleep(time.Minute)
}
