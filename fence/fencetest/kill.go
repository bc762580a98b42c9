package fencetest

import (
	"context"
	"database/sql"
)

// KillPostgres is Store.Kill for PostgreSQL.
func KillPostgres(ctx context.Context, db *sql.DB, conn *sql.Conn) (func() error, error) {
	return killWith(ctx, db, conn, `SELECT pg_backend_pid()`, `SELECT pg_terminate_backend($1)`)
}

// KillMySQL is Store.Kill for MySQL and MariaDB.
func KillMySQL(ctx context.Context, db *sql.DB, conn *sql.Conn) (func() error, error) {
	return killWith(ctx, db, conn, `SELECT CONNECTION_ID()`, `KILL ?`)
}

// killWith reads conn's session id with idQuery and returns a function that
// ends that session from another connection of db with killQuery.
func killWith(ctx context.Context, db *sql.DB, conn *sql.Conn, idQuery, killQuery string) (func() error, error) {
	var id int64
	if err := conn.QueryRowContext(ctx, idQuery).Scan(&id); err != nil {
		return nil, err
	}
	return func() error {
		_, err := db.ExecContext(ctx, killQuery, id)
		return err
	}, nil
}
