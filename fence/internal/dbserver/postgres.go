package dbserver

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// pgUser is the superuser initdb makes, trusted without a password.
const pgUser = "zklock"

// StartPostgres starts a PostgreSQL server: postgres, on a reserved
// loopback port, on a copy of a data directory initdb made (see
// initData), with fsync, synchronous commits and full-page writes off. It
// returns once the server takes connections. The database zklock is owned
// by the superuser zklock, whom the server trusts from 127.0.0.1 (no
// password). As root, initdb and postgres run as user nobody, since
// PostgreSQL refuses to run as root; the temporary directory must then be
// reachable by nobody.
func StartPostgres(ctx context.Context) (*Server, error) {
	bin, err := postgresBin()
	if err != nil {
		return nil, err
	}
	as, err := unprivileged()
	if err != nil {
		return nil, err
	}
	s, err := newServer(Postgres, pgUser)
	if err != nil {
		return nil, err
	}
	s.quit = postgresQuit
	if err := as.own(s.dir); err != nil {
		return nil, s.fail(err)
	}
	initdb, postgres := filepath.Join(bin, "initdb"), filepath.Join(bin, "postgres")
	flags := []string{"-A", "trust", "-U", pgUser, "-E", "UTF8", "--locale=C", "--no-sync", "--wal-segsize=1"}
	key := append([]string{initdb, postgres, Database}, flags...)
	data, err := s.initData(ctx, as, key, func(ctx context.Context, data string) error {
		if err := s.runInit(ctx, as.apply, initdb, append([]string{"-D", data}, flags...)...); err != nil {
			return err
		}
		return s.createDatabase(ctx, as, postgres, data)
	})
	if err != nil {
		return nil, s.fail(err)
	}
	err = s.run(ctx, launcher{
		bin:     postgres,
		args:    func(port int) []string { return postgresArgs(data, socketDir(s.dir), port) },
		prepare: as.apply,
		driver:  "pgx",
		dsn:     func(port int) string { return postgresDSN(port, Database) },
	})
	if err != nil {
		return nil, s.fail(err)
	}
	return s, nil
}

// createDatabase creates Database in data with postgres in single-user
// mode (a server's start, and a client, would take longer).
func (s *Server) createDatabase(ctx context.Context, as *runAs, postgres, data string) error {
	stdin := func(cmd *exec.Cmd) {
		as.apply(cmd)
		cmd.Stdin = strings.NewReader("CREATE DATABASE " + Database + "\n")
	}
	return s.runInit(ctx, stdin, postgres, "--single", "-D", data, "-F", "-c", "exit_on_error=true", "postgres")
}

// postgresArgs are postgres's flags: loopback only, no durability, small.
func postgresArgs(data, sockets string, port int) []string {
	return []string{
		"-D", data,
		"-k", sockets,
		"-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "shared_buffers=16MB",
		"-c", "huge_pages=off",
		"-c", "jit=off",
	}
}

// socketDir is where postgres puts its Unix socket: dir, unless the
// socket's path would be too long for a socket address (a long $TMPDIR),
// then nowhere ("": TCP only).
func socketDir(dir string) string {
	const sunPath = 104 // macOS's; Linux's is 108
	if len(dir)+len("/.s.PGSQL.65535") >= sunPath {
		return ""
	}
	return dir
}

// postgresDSN reaches database db as pgUser over TCP.
func postgresDSN(port int, db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", pgUser, port, db)
}
