package fence

import (
	"context"
	"database/sql"
)

// SQLite is SQLite's SQL (3.24 or later), for modernc.org/sqlite (pure Go)
// or github.com/mattn/go-sqlite3. SQLite has no stored procedures: the check
// is an INSTEAD OF trigger on the view zklock_fence_check, so that callers
// of any language fence with INSERT INTO zklock_fence_check (name, token)
// VALUES (...). Its error cannot say the token seen; Check reads it after.
var SQLite Dialect = sqlite{}

type sqlite struct{}

func (sqlite) Name() string { return "sqlite" }

func (sqlite) Param(int) string { return "?" }

var sqliteInstall = []string{
	`CREATE TABLE IF NOT EXISTS zklock_fence (
		name       TEXT    NOT NULL PRIMARY KEY,
		token      INTEGER NOT NULL CHECK (typeof(token) = 'integer' AND token > 0),
		holder     TEXT    NOT NULL DEFAULT '',
		updated_at TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
	)`,
	`CREATE VIEW IF NOT EXISTS zklock_fence_check (name, token, holder) AS
		SELECT name, token, holder FROM zklock_fence`,
	`CREATE TRIGGER IF NOT EXISTS zklock_fence_check INSTEAD OF INSERT ON zklock_fence_check
	BEGIN
		SELECT RAISE(ABORT, 'zklock_fence: empty name') WHERE NEW.name IS NULL OR NEW.name = '';
		SELECT RAISE(ABORT, 'zklock_fence: token is not a positive integer')
			WHERE typeof(NEW.token) <> 'integer' OR NEW.token <= 0;
		SELECT RAISE(ABORT, 'zklock_fence: stale token')
			WHERE (SELECT token FROM zklock_fence WHERE name = NEW.name) > NEW.token;
		INSERT OR REPLACE INTO zklock_fence (name, token, holder, updated_at)
			VALUES (NEW.name, NEW.token, coalesce(NEW.holder, ''), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));
	END`,
}

func (sqlite) Install(ctx context.Context, db *sql.DB) error {
	return inTx(ctx, db, sqliteInstall)
}

func (s sqlite) Check(ctx context.Context, tx *sql.Tx, name string, token int64, holder string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO zklock_fence_check (name, token, holder) VALUES (?, ?, ?)`, name, token, holder)
	if err == nil || !staleText.MatchString(err.Error()) {
		return err
	}
	// The trigger's message is a constant: read the token seen (the
	// transaction holds the write lock, so it is the latest).
	seen, serr := s.Seen(ctx, tx, name)
	if serr != nil {
		return err
	}
	return &StaleError{Name: name, Token: token, Seen: seen, err: err}
}

func (sqlite) Seen(ctx context.Context, q Querier, name string) (int64, error) {
	return seen(ctx, q, `SELECT token FROM zklock_fence WHERE name = ?`, name)
}
