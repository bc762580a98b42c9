package fence_test

import (
	"database/sql"
	"testing"

	_ "modernc.org/sqlite"
)

// openSQLite opens a SQLite file as the docs advise: transactions take the
// write lock at BEGIN and wait up to 10 s for it.
func openSQLite(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
