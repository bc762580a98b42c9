// Package dbserver starts real database servers for the fence module's
// tests: PostgreSQL and MariaDB, each in a temporary directory of its own,
// listening on 127.0.0.1 only, on a port drawn below the kernel's ephemeral
// range and reserved as zktest reserves ZooKeeper's ports. Durability the
// tests do not need (fsync, full-page writes, the binary log) is off, and
// each server starts on a copy of a data directory initialised once per
// machine (see initData), so that a server is up in half a second. The
// servers come from the system: scripts/install-databases.sh (make dbs)
// installs them.
//
// Each server holds an empty database named zklock, which its DSN names.
// PostgreSQL's user is zklock, trusted without a password; MariaDB's is
// root, with no password (normal authentication, not the Unix socket's).
// Importing the package registers the database/sql drivers "pgx" (for
// PostgreSQL's DSN) and "mysql" (for MariaDB's).
package dbserver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "github.com/go-sql-driver/mysql" // the "mysql" driver, for the readiness check
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, for the readiness check
	"github.com/zklock/zklock/internal/zkserver"
)

// The kinds of server, as Server.Kind and Start name them.
const (
	Postgres = "postgres"
	MariaDB  = "mariadb"
)

// Database is the database every server holds, empty, for the tests.
const Database = "zklock"

// readyBound bounds the wait for a started server to take connections.
const readyBound = 30 * time.Second

// stopBound bounds the wait for a server to exit after Stop's signal,
// before Stop kills it.
const stopBound = 10 * time.Second

// install is how an error tells the user to get a missing server.
const install = "run scripts/install-databases.sh (make dbs)"

// Server is a running database server, started by StartPostgres or
// StartMariaDB; Stop ends it.
type Server struct {
	// Kind is Postgres or MariaDB.
	Kind string
	// DSN reaches Database as User, for database/sql: a URL
	// (postgres://zklock@127.0.0.1:PORT/zklock?sslmode=disable, which
	// pgx's stdlib driver, psql and Node's pg take) for PostgreSQL, and
	// go-sql-driver/mysql's form (root@tcp(127.0.0.1:PORT)/zklock) for
	// MariaDB.
	DSN string
	// Host is the server's address: 127.0.0.1.
	Host string
	// Port is the server's TCP port on Host.
	Port int
	// User is the user the DSN logs in as; it has no password.
	User string
	// Database is the database the DSN names (the package's Database).
	Database string

	dir     string   // the temporary directory: data, logs, socket
	log     string   // the server's log file, in dir
	lock    *os.File // locked while the server lives (see sweep)
	release func()   // drops the port's reservation
	cmd     *exec.Cmd
	exited  chan struct{} // closed once cmd has exited
	quit    os.Signal     // ends the server at once, cleanly enough
	stop    sync.Once
	stopErr error
}

// Start starts a server of the given kind: Postgres or MariaDB.
func Start(ctx context.Context, kind string) (*Server, error) {
	switch kind {
	case Postgres:
		return StartPostgres(ctx)
	case MariaDB:
		return StartMariaDB(ctx)
	}
	return nil, fmt.Errorf("dbserver: unknown kind %q (want %q or %q)", kind, Postgres, MariaDB)
}

// Stop ends the server (at once: no data needs to survive it), waits for
// it to exit, and removes its directory. Only the first call does
// anything; later ones return its error.
func (s *Server) Stop() error {
	s.stop.Do(func() { s.stopErr = s.shutdown() })
	return s.stopErr
}

func (s *Server) shutdown() error {
	var errs []error
	if s.cmd != nil {
		errs = append(errs, s.end())
	}
	if s.release != nil {
		s.release()
	}
	if err := os.RemoveAll(s.dir); err != nil {
		errs = append(errs, fmt.Errorf("dbserver: removing %s: %w", s.dir, err))
	}
	if s.lock != nil {
		s.lock.Close()
	}
	return errors.Join(errs...)
}

// end signals the server to quit and waits for it, killing it after
// stopBound. A server that had exited on its own is an error.
func (s *Server) end() error {
	select {
	case <-s.exited:
		return fmt.Errorf("dbserver: %s had exited before Stop: %v%s", s.Kind, s.cmd.ProcessState, s.logTail())
	default:
	}
	signalProcess(s.cmd.Process, s.quit)
	select {
	case <-s.exited:
		return nil
	case <-time.After(stopBound):
	}
	killGroup(s.cmd.Process)
	<-s.exited
	return fmt.Errorf("dbserver: %s outlived its signal %v by %v: killed", s.Kind, s.quit, stopBound)
}

// newServer makes the server's temporary directory, marked as in use
// (see sweep), after sweeping the directories of test processes gone.
func newServer(kind, user string) (*Server, error) {
	sweepOnce.Do(func() { sweep(filepath.Join(os.TempDir(), dirPrefix+"*")) })
	dir, err := os.MkdirTemp("", dirPrefix+kind+"-")
	if err != nil {
		return nil, fmt.Errorf("dbserver: %w", err)
	}
	s := &Server{Kind: kind, Host: "127.0.0.1", User: user, Database: Database, dir: dir,
		log: filepath.Join(dir, "server.log")}
	if s.lock, err = lockDir(dir); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("dbserver: %w", err)
	}
	return s, nil
}

// launcher is what run needs to know of a kind of server.
type launcher struct {
	bin  string
	args func(port int) []string
	// prepare adjusts the command: credentials, for one.
	prepare func(*exec.Cmd)
	// driver and dsn reach the server's Database: the readiness check's
	// ping, and Server.DSN.
	driver string
	dsn    func(port int) string
}

// run starts the server on a fresh reserved port and waits until it takes
// connections. A port another process bound between its reservation and
// the server's bind is retried.
func (s *Server) run(ctx context.Context, l launcher) error {
	for attempt := 1; ; attempt++ {
		err := s.runOn(ctx, l)
		if err == nil || attempt == 3 || !s.portClash() {
			return err
		}
		s.release()
	}
}

func (s *Server) runOn(ctx context.Context, l launcher) error {
	port, release, err := zkserver.ReservePort()
	if err != nil {
		return fmt.Errorf("dbserver: %w", err)
	}
	s.Port, s.release = port, release
	if err := s.spawn(l.bin, l.args(port), l.prepare); err != nil {
		return err
	}
	db, err := sql.Open(l.driver, l.dsn(port))
	if err != nil {
		return fmt.Errorf("dbserver: %w", err)
	}
	defer db.Close()
	if err := s.awaitReady(ctx, db); err != nil {
		return err
	}
	s.DSN = l.dsn(port)
	return nil
}

// spawn starts the server, its output going to its log.
func (s *Server) spawn(bin string, args []string, prepare func(*exec.Cmd)) error {
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("dbserver: %w", err)
	}
	defer logf.Close() // the server has its own copy
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = s.dir, logf, logf
	setProcAttr(cmd, s.quit)
	if prepare != nil {
		prepare(cmd)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("dbserver: starting %s: %w", bin, err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	go func() {
		cmd.Wait()
		close(s.exited)
	}()
	return nil
}

// awaitReady waits, at most readyBound, until db (the server) answers a
// ping, giving up early if the server exits.
func (s *Server) awaitReady(ctx context.Context, db *sql.DB) error {
	ctx, cancel := context.WithTimeout(ctx, readyBound)
	defer cancel()
	addr := net.JoinHostPort(s.Host, strconv.Itoa(s.Port))
	var last error
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("dbserver: %s exited while starting: %v%s", s.Kind, s.cmd.ProcessState, s.logTail())
		default:
		}
		if last = ping(ctx, addr, db); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("dbserver: %s on %s not ready (%w): last try: %v%s", s.Kind, addr, ctx.Err(), last, s.logTail())
		case <-s.exited:
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ping dials addr first, so that the driver tries only a server that
// listens (the mysql driver logs some failures on its own).
func ping(ctx context.Context, addr string, db *sql.DB) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	c.Close()
	return db.PingContext(ctx)
}

// portClash reports whether the server exited because its port was taken.
func (s *Server) portClash() bool {
	if s.exited == nil {
		return false
	}
	select {
	case <-s.exited:
	default:
		return false
	}
	b, _ := os.ReadFile(s.log)
	return strings.Contains(string(b), "Address already in use")
}

// logTail is the end of the server's log, for an error.
func (s *Server) logTail() string { return tail(s.log) }

// tail returns the last lines of file, set off for an error message, or ""
// when there is nothing to show.
func tail(file string) string {
	const max = 3000
	b, err := os.ReadFile(file)
	if err != nil || len(strings.TrimSpace(string(b))) == 0 {
		return ""
	}
	if len(b) > max {
		b = b[len(b)-max:]
		if i := strings.IndexByte(string(b), '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return "\n--- " + file + " (its end) ---\n" + strings.TrimRight(string(b), "\n")
}

// runInit runs an initialisation step (initdb, mariadb-install-db) with
// its output in a log in the server's directory, bounded by ctx and
// readyBound.
func (s *Server) runInit(ctx context.Context, prepare func(*exec.Cmd), bin string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, readyBound)
	defer cancel()
	logFile := filepath.Join(s.dir, filepath.Base(bin)+".log") // initdb.log, ...
	logf, err := os.Create(logFile)
	if err != nil {
		return fmt.Errorf("dbserver: %w", err)
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = s.dir, logf, logf
	if prepare != nil {
		prepare(cmd)
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("dbserver: %s: %w%s", filepath.Base(bin), err, tail(logFile))
	}
	return nil
}

// fail stops what was started of s and returns err.
func (s *Server) fail(err error) error {
	s.Stop()
	return err
}
