package dbserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// StartMariaDB starts a MariaDB server: mariadbd, on a reserved loopback
// port, on a copy of a data directory mariadb-install-db made (see
// initData), with InnoDB's flushing, the binary log and the system's sync
// calls off. It returns once the server takes connections. The database
// zklock has the character set utf8mb4; the user root has no password, and
// logs in with normal authentication, over TCP.
func StartMariaDB(ctx context.Context) (*Server, error) {
	mariadbd, err := findBin("mariadbd", "/usr/sbin")
	if err != nil {
		return nil, err
	}
	installDB, err := findBin("mariadb-install-db", "/usr/bin")
	if err != nil {
		return nil, err
	}
	s, err := newServer(MariaDB, "root")
	if err != nil {
		return nil, err
	}
	s.quit = os.Kill // nothing to keep: SIGKILL is the fastest end
	flags := append([]string{"--auth-root-authentication-method=normal", "--skip-test-db"}, mariadbTuning()...)
	key := append([]string{installDB, mariadbd, Database}, flags...)
	data, err := s.initData(ctx, nil, key, func(ctx context.Context, data string) error {
		create := filepath.Join(s.dir, "create.sql") // run after the system tables' SQL
		if err := os.WriteFile(create, []byte("CREATE DATABASE "+Database+";\n"), 0o644); err != nil {
			return fmt.Errorf("dbserver: %w", err)
		}
		// --no-defaults comes first, or mariadb-install-db ignores it.
		args := append([]string{"--no-defaults", "--datadir=" + data, "--extra-file=" + create}, flags...)
		return s.runInit(ctx, nil, installDB, args...)
	})
	if err != nil {
		return nil, s.fail(err)
	}
	err = s.run(ctx, launcher{
		bin:    mariadbd,
		args:   func(port int) []string { return mariadbArgs(s.dir, data, port) },
		driver: "mysql",
		dsn:    func(port int) string { return mariadbDSN(port, Database) },
	})
	if err != nil {
		return nil, s.fail(err)
	}
	return s, nil
}

// mariadbArgs are mariadbd's flags: loopback only, its files in dir.
func mariadbArgs(dir, data string, port int) []string {
	return append([]string{
		"--no-defaults", // first, or mariadbd ignores it
		"--datadir=" + data,
		"--socket=" + filepath.Join(dir, "mariadbd.sock"),
		"--pid-file=" + filepath.Join(dir, "mariadbd.pid"),
		"--port=" + strconv.Itoa(port),
		"--bind-address=127.0.0.1",
		"--skip-networking=0",
	}, mariadbTuning()...)
}

// mariadbTuning are the flags both mariadb-install-db (which passes them
// to its bootstrap server) and mariadbd get: small, and never waiting for
// the disk. --debug-no-sync halves mariadb-install-db's time (its system
// tables are Aria's, which sync on their own).
func mariadbTuning() []string {
	t := []string{
		"--skip-name-resolve",
		"--skip-log-bin",
		"--character-set-server=utf8mb4",
		"--innodb-buffer-pool-size=16M",
		"--innodb-log-file-size=16M",
		"--innodb-flush-log-at-trx-commit=0",
		"--innodb-flush-method=nosync",
		"--innodb-doublewrite=0",
		"--debug-no-sync",
	}
	if os.Geteuid() == 0 {
		t = append(t, "--user=root") // else mariadbd refuses root
	}
	return t
}

// mariadbDSN reaches database db as root over TCP, in go-sql-driver/mysql's
// form.
func mariadbDSN(port int, db string) string {
	return fmt.Sprintf("root@tcp(127.0.0.1:%d)/%s", port, db)
}
