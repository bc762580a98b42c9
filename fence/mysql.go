package fence

import (
	"context"
	"database/sql"
)

// MySQL is MySQL's and MariaDB's SQL (InnoDB), for
// github.com/go-sql-driver/mysql.
var MySQL Dialect = mysqlDialect{}

type mysqlDialect struct{}

func (mysqlDialect) Name() string { return "mysql" }

func (mysqlDialect) Param(int) string { return "?" }

// mysqlInstall: the table and CALL zklock_fence(name, token, holder). The
// INSERT ... ON DUPLICATE KEY takes the row's exclusive lock even when it
// changes nothing; SELECT ... FOR UPDATE then reads the latest committed
// token at any isolation level. A SIGNAL does not roll the transaction back:
// the caller must (a client that disconnects on the error does).
var mysqlInstall = []string{
	`CREATE TABLE IF NOT EXISTS zklock_fence (
		name       VARCHAR(255) NOT NULL PRIMARY KEY,
		token      BIGINT       NOT NULL,
		holder     VARCHAR(255) NOT NULL DEFAULT '',
		updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
	) ENGINE = InnoDB`,
	`DROP PROCEDURE IF EXISTS zklock_fence`,
	`CREATE PROCEDURE zklock_fence(IN p_name VARCHAR(255), IN p_token BIGINT, IN p_holder VARCHAR(255))
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
			SET msg = CONCAT('zklock_fence: stale token ', p_token, ' (seen ', seen, ') for ', p_name);
			SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
		END IF;
		UPDATE zklock_fence SET token = p_token, holder = IFNULL(p_holder, ''), updated_at = CURRENT_TIMESTAMP(6)
			WHERE name = p_name;
	END`,
}

func (mysqlDialect) Install(ctx context.Context, db *sql.DB) error {
	// One connection: GET_LOCK serializes concurrent Installs (DROP then
	// CREATE PROCEDURE is not atomic), and is the connection's own.
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT GET_LOCK('zklock_fence_install', 30)`); err != nil {
		return err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT RELEASE_LOCK('zklock_fence_install')`) //nolint:errcheck
	return execAll(ctx, conn, mysqlInstall)
}

func (mysqlDialect) Check(ctx context.Context, tx *sql.Tx, name string, token int64, holder string) error {
	_, err := tx.ExecContext(ctx, `CALL zklock_fence(?, ?, ?)`, name, token, holder)
	return err
}

func (mysqlDialect) Seen(ctx context.Context, q Querier, name string) (int64, error) {
	return seen(ctx, q, `SELECT token FROM zklock_fence WHERE name = ?`, name)
}
