package dbserver

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Each kind starts, answers SELECT 1 in database zklock through its
// driver and DSN, and Stop frees its port and removes its directory.
func TestStartQueryStop(t *testing.T) {
	for _, tc := range []struct{ kind, driver, currentDB string }{
		{Postgres, "pgx", "SELECT current_database()"},
		{MariaDB, "mysql", "SELECT DATABASE()"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			begin := time.Now()
			s, err := Start(context.Background(), tc.kind)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s started in %v: %s", tc.kind, time.Since(begin).Round(time.Millisecond), s.DSN)
			if s.Kind != tc.kind || s.Host != "127.0.0.1" || s.Port == 0 || s.Database != Database || s.User == "" {
				t.Errorf("server %+v", s)
			}
			query(t, s, tc.driver, tc.currentDB)
			if tc.kind == Postgres {
				psql(t, s)
			}
			stopped(t, s)
		})
	}
}

// query runs SELECT 1 and checks the DSN's database.
func query(t *testing.T, s *Server, driver, currentDB string) {
	t.Helper()
	db, err := sql.Open(driver, s.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var one int
	if err := db.QueryRow("SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1: %d, %v", one, err)
	}
	var name string
	if err := db.QueryRow(currentDB).Scan(&name); err != nil || name != Database {
		t.Fatalf("%s: %q, %v", currentDB, name, err)
	}
}

// psql takes the PostgreSQL DSN as it is.
func psql(t *testing.T, s *Server) {
	t.Helper()
	bin, err := exec.LookPath("psql")
	if err != nil {
		t.Log("no psql on $PATH: its use of the DSN untried")
		return
	}
	out, err := exec.Command(bin, "-X", "-At", "-c", "SELECT 1", s.DSN).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "1" {
		t.Fatalf("psql %s: %v: %s", s.DSN, err, out)
	}
}

// stopped stops s and checks what Stop promises.
func stopped(t *testing.T, s *Server) {
	t.Helper()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("a second Stop: %v", err)
	}
	if _, err := os.Stat(s.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s left after Stop: %v", s.dir, err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(s.Host, strconv.Itoa(s.Port)))
	if err != nil {
		t.Fatalf("port %d still taken after Stop: %v", s.Port, err)
	}
	l.Close()
}

// Shared starts one server per kind and process; StopShared ends it.
func TestShared(t *testing.T) {
	s, err := Shared(MariaDB)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Shared(MariaDB)
	if err != nil || again != s {
		t.Fatalf("a second Shared: %p, %v; want %p", again, err, s)
	}
	if _, err := Shared("oracle"); err == nil {
		t.Error("Shared of an unknown kind")
	}
	if err := StopShared(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s left after StopShared: %v", s.dir, err)
	}
}

// A directory whose lock nobody holds is swept; a held one is kept.
func TestPureSweepRemovesOnlyAbandonedDirectories(t *testing.T) {
	mk := func() string {
		dir, err := os.MkdirTemp("", dirPrefix+"test-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	abandoned, held, making := mk(), mk(), mk()
	f, err := lockDir(abandoned)
	if err != nil {
		t.Fatal(err)
	}
	f.Close() // as a dead test binary's
	lk, err := lockDir(held)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	sweep(filepath.Join(os.TempDir(), dirPrefix+"test-*"))
	if _, err := os.Stat(abandoned); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("abandoned %s kept: %v", abandoned, err)
	}
	for _, dir := range []string{held, making} {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("%s swept: %v", dir, err)
		}
	}
}

// A missing binary's error says how to get it.
func TestPureMissingBinarySaysHowToInstall(t *testing.T) {
	_, err := findBin("no-such-dbserver-binary", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "run scripts/install-databases.sh (make dbs)") {
		t.Fatalf("error %v", err)
	}
}

// Debian's PostgreSQL directories order by version, numerically.
func TestPureVersionOrder(t *testing.T) {
	dir := func(v string) string { return filepath.Join("/usr/lib/postgresql", v, "bin") }
	for _, c := range [][2]string{{"9.6", "15"}, {"15", "16"}, {"9.5", "9.6"}, {"16", "16.1"}} {
		if !versionLess(dir(c[0]), dir(c[1])) || versionLess(dir(c[1]), dir(c[0])) {
			t.Errorf("%s and %s out of order", c[0], c[1])
		}
	}
}

// A server that exits while starting is an error that shows its log's
// end, and one that exits saying its port is taken is retried, twice.
func TestPureStartFailureShowsTheLogAndRetriesAPortClash(t *testing.T) {
	for _, tc := range []struct {
		say      string
		attempts int
	}{{"boom", 1}, {"bind: Address already in use", 3}} {
		s, err := newServer("fake", "nobody")
		if err != nil {
			t.Fatal(err)
		}
		s.quit = os.Kill
		count := filepath.Join(s.dir, "attempts")
		err = s.run(context.Background(), launcher{
			bin:    "/bin/sh",
			args:   func(int) []string { return []string{"-c", "echo x >>" + count + "; echo '" + tc.say + "'; exit 3"} },
			driver: "pgx",
			dsn:    func(port int) string { return postgresDSN(port, Database) },
		})
		if err == nil || !strings.Contains(err.Error(), "exited while starting") || !strings.Contains(err.Error(), tc.say) {
			t.Errorf("error %v", err)
		}
		if b, _ := os.ReadFile(count); strings.Count(string(b), "x") != tc.attempts {
			t.Errorf("%q: %d attempts, want %d", tc.say, strings.Count(string(b), "x"), tc.attempts)
		}
		s.fail(nil)
		if _, err := os.Stat(s.dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left after a failed start: %v", s.dir, err)
		}
	}
}
