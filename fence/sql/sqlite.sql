CREATE TABLE IF NOT EXISTS zklock_fence (
		name       TEXT    NOT NULL PRIMARY KEY,
		token      INTEGER NOT NULL CHECK (typeof(token) = 'integer' AND token > 0),
		holder     TEXT    NOT NULL DEFAULT '',
		updated_at TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
	);
CREATE VIEW IF NOT EXISTS zklock_fence_check (name, token, holder) AS
		SELECT name, token, holder FROM zklock_fence;
CREATE TRIGGER IF NOT EXISTS zklock_fence_check INSTEAD OF INSERT ON zklock_fence_check
	BEGIN
		SELECT RAISE(ABORT, 'zklock_fence: empty name') WHERE NEW.name IS NULL OR NEW.name = '';
		SELECT RAISE(ABORT, 'zklock_fence: token is not a positive integer')
			WHERE typeof(NEW.token) <> 'integer' OR NEW.token <= 0;
		SELECT RAISE(ABORT, 'zklock_fence: stale token')
			WHERE (SELECT token FROM zklock_fence WHERE name = NEW.name) > NEW.token;
		INSERT OR REPLACE INTO zklock_fence (name, token, holder, updated_at)
			VALUES (NEW.name, NEW.token, coalesce(NEW.holder, ''), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));
	END;
