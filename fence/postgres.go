package fence

import (
	"context"
	"database/sql"
	"strconv"
)

// Postgres is PostgreSQL's SQL (9.5 or later: INSERT ... ON CONFLICT), for
// any database/sql driver (github.com/jackc/pgx/v5/stdlib, lib/pq).
var Postgres Dialect = postgres{}

type postgres struct{}

func (postgres) Name() string { return "postgres" }

func (postgres) Param(n int) string { return "$" + strconv.Itoa(n) }

// postgresInstall: the table and zklock_fence(name, token[, holder]), the
// check callers of any language run first in their transaction. Run in one
// transaction, whose advisory lock serializes concurrent Installs (CREATE
// OR REPLACE of one function from two sessions at once fails).
var postgresInstall = []string{
	`SELECT pg_advisory_xact_lock(7498011873)`,
	`CREATE TABLE IF NOT EXISTS zklock_fence (
		name       text        PRIMARY KEY,
		token      bigint      NOT NULL CHECK (token > 0),
		holder     text        NOT NULL DEFAULT '',
		updated_at timestamptz NOT NULL DEFAULT now()
	)`,
	`CREATE OR REPLACE FUNCTION zklock_fence(p_name text, p_token bigint, p_holder text DEFAULT '')
	RETURNS bigint LANGUAGE plpgsql AS $$
	DECLARE
		seen bigint;
	BEGIN
		IF p_name IS NULL OR p_name = '' THEN
			RAISE EXCEPTION 'zklock_fence: empty name' USING ERRCODE = '22023';
		END IF;
		IF p_token IS NULL OR p_token <= 0 THEN
			RAISE EXCEPTION 'zklock_fence: token % is not positive', p_token USING ERRCODE = '22023';
		END IF;
		-- Locks the row whether or not it updates it.
		INSERT INTO zklock_fence AS f (name, token, holder) VALUES (p_name, p_token, coalesce(p_holder, ''))
		ON CONFLICT (name) DO UPDATE
			SET token = EXCLUDED.token, holder = EXCLUDED.holder, updated_at = now()
			WHERE f.token <= EXCLUDED.token
		RETURNING f.token INTO seen;
		IF seen IS NULL THEN
			SELECT f.token INTO seen FROM zklock_fence f WHERE f.name = p_name;
			RAISE EXCEPTION 'zklock_fence: stale token % (seen %) for %', p_token, seen, p_name;
		END IF;
		RETURN p_token;
	END $$`,
	`COMMENT ON FUNCTION zklock_fence(text, bigint, text) IS '` + fenceVersion + `'`,
}

func (postgres) Install(ctx context.Context, db *sql.DB) error {
	var current bool
	err := db.QueryRowContext(ctx, `SELECT to_regclass('zklock_fence') IS NOT NULL AND coalesce(
		obj_description(to_regprocedure('zklock_fence(text,bigint,text)'), 'pg_proc') = $1, false)`, fenceVersion).Scan(&current)
	if err == nil && current {
		return nil
	}
	return inTx(ctx, db, postgresInstall) // DDL is transactional here
}

func (postgres) Check(ctx context.Context, tx *sql.Tx, name string, token int64, holder string) error {
	var got int64
	return tx.QueryRowContext(ctx, `SELECT zklock_fence($1, $2, $3)`, name, token, holder).Scan(&got)
}

func (postgres) Seen(ctx context.Context, q Querier, name string) (int64, error) {
	return seen(ctx, q, `SELECT token FROM zklock_fence WHERE name = $1`, name)
}
