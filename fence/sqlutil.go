package fence

import (
	"context"
	"database/sql"
	"errors"
	"strings"
)

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// execAll runs the statements one by one (drivers differ on several in one
// Exec).
func execAll(ctx context.Context, db execer, stmts []string) error {
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// seen reads a fence's token, 0 when it has none.
func seen(ctx context.Context, q Querier, query, name string) (int64, error) {
	var token int64
	err := q.QueryRowContext(ctx, query, name).Scan(&token)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return token, err
}

// inTx runs the statements in one transaction.
func inTx(ctx context.Context, db *sql.DB, stmts []string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit, ErrTxDone
	if err := execAll(ctx, tx, stmts); err != nil {
		return err
	}
	return tx.Commit()
}

// fenceVersion marks the server-side check Install made (a comment on the
// function or procedure): Install leaves a current one alone, so that a role
// without DDL rights may call it, and callers never see the check missing
// while it is replaced.
const fenceVersion = "zklock_fence v1"

// InstallScript returns InstallSQL(d) as a script the store's own client
// runs (psql -f, mysql, sqlite3 or Python's executescript); fence/sql holds
// each built-in dialect's, for migration tools. "" for another dialect.
func InstallScript(d Dialect) string {
	var b strings.Builder
	if d == MySQL {
		b.WriteString("DELIMITER //\n")
		for _, s := range InstallSQL(d) {
			b.WriteString(s + " //\n")
		}
		b.WriteString("DELIMITER ;\n")
		return b.String()
	}
	for _, s := range InstallSQL(d) {
		b.WriteString(s + ";\n")
	}
	return b.String()
}

// InstallSQL returns the statements Install runs for one of this package's
// dialects, in order (PostgreSQL's in one transaction), for installing by
// hand or by a migration tool; nil for another dialect.
func InstallSQL(d Dialect) []string {
	switch d {
	case Postgres:
		return append([]string{"BEGIN"}, append(postgresInstall, "COMMIT")...)
	case MySQL:
		return mysqlInstall
	case SQLite:
		return sqliteInstall
	}
	return nil
}
