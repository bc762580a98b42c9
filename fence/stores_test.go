package fence_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/zklock/zklock/fence"
	"github.com/zklock/zklock/fence/fencetest"
	"github.com/zklock/zklock/fence/internal/dbserver"
)

// store is one of the three stores, on a real server (SQLite: a file).
type store struct {
	name  string
	d     fence.Dialect
	db    func(t testing.TB) *sql.DB // the shared test database
	empty func(t *testing.T) *sql.DB // a new database with nothing in it
	suite func(s *fencetest.Store)   // what the conformance suite needs besides
}

var dbCount atomic.Int64

// The MySQL driver logs a connection the suite kills on purpose.
func init() { _ = mysql.SetLogger(log.New(io.Discard, "", 0)) }

func stores() []store { return []store{sqliteStore(), postgresStore(), mariaDBStore()} }

func sqliteStore() store {
	return store{
		name: "sqlite", d: fence.SQLite,
		db:    func(t testing.TB) *sql.DB { return openSQLite(t, filepath.Join(t.TempDir(), "fence.db")) },
		empty: func(t *testing.T) *sql.DB { return openSQLite(t, filepath.Join(t.TempDir(), "empty.db")) },
		suite: func(s *fencetest.Store) { s.Levels = []sql.IsolationLevel{sql.LevelSerializable} },
	}
}

func postgresStore() store {
	return store{
		name: "postgres", d: fence.Postgres,
		db: func(t testing.TB) *sql.DB { return openOn(t, "postgres", "pgx", "") },
		empty: func(t *testing.T) *sql.DB {
			return openOn(t, "postgres", "pgx", newDatabase(t, "postgres", "pgx"))
		},
		suite: func(s *fencetest.Store) {
			s.Kill = fencetest.KillPostgres
			s.Blocked = blockedBy(s.DB, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'`)
			s.Levels = []sql.IsolationLevel{sql.LevelRepeatableRead, sql.LevelSerializable}
		},
	}
}

func mariaDBStore() store {
	return store{
		name: "mariadb", d: fence.MySQL,
		db: func(t testing.TB) *sql.DB { return openOn(t, "mariadb", "mysql", "") },
		empty: func(t *testing.T) *sql.DB {
			return openOn(t, "mariadb", "mysql", newDatabase(t, "mariadb", "mysql"))
		},
		suite: func(s *fencetest.Store) {
			s.Kill = fencetest.KillMySQL
			blocked := blockedBy(s.DB, `SELECT count(*) FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT'`)
			s.Blocked = func(ctx context.Context) (int, error) {
				time.Sleep(110 * time.Millisecond) // past InnoDB's cache of the table
				return blocked(ctx)
			}
			s.Levels = []sql.IsolationLevel{sql.LevelReadCommitted, sql.LevelSerializable}
		},
	}
}

// server is the shared server of kind, failing t with how to get one.
func server(t testing.TB, kind string) *dbserver.Server {
	t.Helper()
	s, err := dbserver.Shared(kind)
	if err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
	return s
}

// openOn opens database (the server's own when "") on the shared server of
// kind.
func openOn(t testing.TB, kind, driver, database string) *sql.DB {
	t.Helper()
	s := server(t, kind)
	dsn := s.DSN
	if database != "" {
		dsn = dsnFor(s, database)
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// newDatabase creates an empty database on the shared server of kind.
func newDatabase(t testing.TB, kind, driver string) string {
	t.Helper()
	name := fmt.Sprintf("zklock_empty_%d", dbCount.Add(1))
	db := openOn(t, kind, driver, "")
	if _, err := db.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	return name
}

func blockedBy(db *sql.DB, query string) func(ctx context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		var n int
		err := db.QueryRowContext(ctx, query).Scan(&n)
		return n, err
	}
}

func TestConformance(t *testing.T) {
	for _, st := range stores() {
		t.Run(st.name, func(t *testing.T) {
			s := fencetest.Store{Dialect: st.d, DB: st.db(t), Empty: st.empty}
			st.suite(&s)
			fencetest.Run(t, s)
		})
	}
}

// dsnFor is the DSN of database on s.
func dsnFor(s *dbserver.Server, database string) string {
	if s.Kind == "postgres" {
		return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", s.User, s.Host, s.Port, database)
	}
	return fmt.Sprintf("%s@tcp(%s:%d)/%s", s.User, s.Host, s.Port, database)
}
