package fence

import (
	"context"
	"database/sql"
	"errors"
)

// MySQL is MySQL's and MariaDB's SQL (InnoDB), for
// github.com/go-sql-driver/mysql.
var MySQL Dialect = mysqlDialect{}

type mysqlDialect struct{}

func (mysqlDialect) Name() string { return "mysql" }

func (mysqlDialect) Param(int) string { return "?" }

// mysqlInstall: the table and CALL zklock_fence(name, token, holder). Names
// and holders are bytes (VARBINARY): a collation would make "/jobs/Report"
// and "/jobs/report " one fence, and a latin1 default refuse others. The
// INSERT ... ON DUPLICATE KEY takes the row's exclusive lock even when it
// changes nothing; SELECT ... FOR UPDATE then reads the latest committed
// token at any isolation level. A SIGNAL does not roll the transaction back:
// the caller must (a client that disconnects on the error does).
var mysqlInstall = []string{
	`CREATE TABLE IF NOT EXISTS zklock_fence (
		name       VARBINARY(255) NOT NULL PRIMARY KEY,
		token      BIGINT         NOT NULL,
		holder     VARBINARY(255) NOT NULL DEFAULT '',
		updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
	) ENGINE = InnoDB`,
	`DROP PROCEDURE IF EXISTS zklock_fence`,
	`CREATE PROCEDURE zklock_fence(IN p_name VARBINARY(255), IN p_token BIGINT, IN p_holder VARBINARY(255))
	COMMENT '` + fenceVersion + `'
	MODIFIES SQL DATA
	BEGIN
		DECLARE seen BIGINT;
		DECLARE msg VARCHAR(512);
		IF p_name IS NULL OR p_name = '' THEN
			SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'zklock_fence: empty name';
		END IF;
		IF p_token IS NULL OR p_token <= 0 THEN
			SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'zklock_fence: token is not positive';
		END IF;
		INSERT INTO zklock_fence (name, token, holder) VALUES (p_name, p_token, IFNULL(p_holder, ''))
			ON DUPLICATE KEY UPDATE name = name;
		SELECT token INTO seen FROM zklock_fence WHERE name = p_name FOR UPDATE;
		IF seen > p_token THEN
			-- No name: MySQL cuts a SIGNAL's text at 128 characters.
			SET msg = CONCAT('zklock_fence: stale token ', p_token, ' (seen ', seen, ')');
			SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
		END IF;
		UPDATE zklock_fence SET token = p_token, holder = IFNULL(p_holder, ''), updated_at = CURRENT_TIMESTAMP(6)
			WHERE name = p_name;
	END`,
}

// mysqlCurrent: the table is there and the procedure is this version's.
const mysqlCurrent = `SELECT
	(SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'zklock_fence') +
	(SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE()
		AND ROUTINE_NAME = 'zklock_fence' AND ROUTINE_COMMENT = ?)`

func (mysqlDialect) Install(ctx context.Context, db *sql.DB) error {
	// One connection: GET_LOCK serializes concurrent Installs (DROP then
	// CREATE PROCEDURE is not atomic), and is the connection's own. A
	// current installation is left alone: callers never see the procedure
	// missing, and a role without DDL rights may call Install.
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if mysqlIsCurrent(ctx, conn) {
		return nil
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, `SELECT GET_LOCK('zklock_fence_install', 30)`).Scan(&got); err != nil {
		return err
	}
	if got.Int64 != 1 {
		return errors.New("another Install held the lock zklock_fence_install for 30 s")
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT RELEASE_LOCK('zklock_fence_install')`) //nolint:errcheck
	if mysqlIsCurrent(ctx, conn) {
		return nil // installed by the Install we waited for
	}
	return execAll(ctx, conn, mysqlInstall)
}

func mysqlIsCurrent(ctx context.Context, conn *sql.Conn) bool {
	var n int
	return conn.QueryRowContext(ctx, mysqlCurrent, fenceVersion).Scan(&n) == nil && n == 2
}

func (mysqlDialect) Check(ctx context.Context, tx *sql.Tx, name string, token int64, holder string) error {
	_, err := tx.ExecContext(ctx, `CALL zklock_fence(?, ?, ?)`, name, token, holder)
	return err
}

func (mysqlDialect) Seen(ctx context.Context, q Querier, name string) (int64, error) {
	return seen(ctx, q, `SELECT token FROM zklock_fence WHERE name = ?`, name)
}
