package fence_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDocsExamples runs docs/fencing.md's Python, Node and psql examples as
// the doc says users run them: each block is written to a file under the
// name its first line gives, the fence installed as the doc says
// (zklock-fence install; for psql, zklock-fence sql's output run with
// psql -f), and the file run under a real
// `zklock exec /jobs/report -- ...` (the command the block's first line
// gives, word for word) against the shared ZooKeeper. The first run must
// write its one row; then a newer holder's claim (zklock-fence claim, a
// token larger than any ZooKeeper will hand out) must make the next run
// exit as the doc says, with nothing written.
func TestDocsExamples(t *testing.T) {
	doc, err := os.ReadFile("../docs/fencing.md")
	if err != nil {
		t.Fatal(err)
	}
	bin := buildCLIs(t)
	zk := sharedZooKeeper(t)
	env := append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"ZKLOCK_SERVERS="+strings.Join(zk.Addrs(), ","),
	)

	t.Run("python-sqlite", func(t *testing.T) {
		if _, err := exec.LookPath("python3"); err != nil {
			t.Fatal("python3 is not on $PATH: the doc's Python example needs it (Debian: apt-get install python3)")
		}
		ex := docExample(t, doc, "python", "# report.py: ")
		dir := t.TempDir()
		ex.write(t, dir, 0o644)
		dbFile := "reports.db"
		r := docRunner{t: t, dir: dir, env: env, bin: bin}
		r.ok("python3", "-c", `import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("CREATE TABLE reports (day TEXT, body TEXT)")
db.commit()
db.close()`, dbFile)
		r.ok(filepath.Join(bin, "zklock-fence"), "install", "-dsn", dbFile)
		db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, dbFile)+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		ex.refusedAfterClaim(r, db, dbFile, 1, "report: the lock passed on, nothing written: zklock_fence: stale token")
	})

	t.Run("node-pg", func(t *testing.T) {
		if _, err := exec.LookPath("node"); err != nil {
			t.Fatal("node is not on $PATH: the doc's Node example needs Node.js; run scripts/install-databases.sh")
		}
		modules := nodeModules(t)
		ex := docExample(t, doc, "js", "// report.js: ")
		ex.postgres = true
		dir := t.TempDir()
		ex.write(t, dir, 0o644)
		dsn, db := postgresDatabase(t)
		r := docRunner{t: t, dir: dir, env: append(env, "DATABASE_URL="+dsn, "NODE_PATH="+modules), bin: bin}
		r.ok(filepath.Join(bin, "zklock-fence"), "install", "-dsn", dsn)
		mustExec(t, db, `CREATE TABLE reports (day date, body text)`)
		ex.refusedAfterClaim(r, db, dsn, 76, "report: the lock passed on, nothing written: zklock_fence: stale token")
	})

	t.Run("psql", func(t *testing.T) {
		if _, err := exec.LookPath("psql"); err != nil {
			t.Fatal("psql is not on $PATH: run scripts/install-databases.sh")
		}
		ex := docExample(t, doc, "sh", "#!/bin/sh\n# report.sh: ")
		ex.postgres = true
		dir := t.TempDir()
		ex.write(t, dir, 0o755)
		dsn, db := postgresDatabase(t)
		r := docRunner{t: t, dir: dir, env: append(env, "DATABASE_URL="+dsn), bin: bin}
		// The doc's other way: zklock-fence sql's output, for psql -f.
		r.ok("sh", "-c", `zklock-fence sql -store postgres >fence.sql && psql "$DATABASE_URL" --no-psqlrc --quiet -v ON_ERROR_STOP=1 -f fence.sql`)
		mustExec(t, db, `CREATE TABLE reports (day date, body text)`)
		ex.refusedAfterClaim(r, db, dsn, 3, "zklock_fence: stale token")
	})
}

// refusedAfterClaim runs the example under zklock exec twice: the first run
// writes one row and records its token; after a claim of a larger token,
// the second exits wantCode with wantErr in its output and writes nothing.
func (ex example) refusedAfterClaim(r docRunner, db *sql.DB, dsn string, wantCode int, wantErr string) {
	t := r.t
	t.Helper()
	began := time.Now()
	out := r.ok(ex.argv...)
	t.Logf("first run: %s: %v", strings.Join(ex.argv, " "), time.Since(began).Round(time.Millisecond))
	if n := count(t, db, `SELECT count(*) FROM reports WHERE body = 'nightly'`); n != 1 {
		t.Fatalf("after the first run reports holds %d rows, want 1; the run's output:\n%s", n, out)
	}
	if seen := count(t, db, `SELECT token FROM zklock_fence WHERE name = '/jobs/report'`); seen <= 0 {
		t.Fatalf("after the first run the fence /jobs/report records token %d, want the holder's", seen)
	}
	if ex.postgres {
		// The check and the work in one transaction: the rows' xmin.
		fenced := count(t, db, `SELECT xmin::text::bigint FROM zklock_fence WHERE name = '/jobs/report'`)
		if work := count(t, db, `SELECT xmin::text::bigint FROM reports`); work != fenced {
			t.Fatalf("the first run's check and its work ran in different transactions (%d and %d)", fenced, work)
		}
	}
	const newer = int64(1) << 62 // larger than any zxid a test's ZooKeeper reaches
	r.ok(filepath.Join(r.bin, "zklock-fence"), "claim", "-dsn", dsn, "/jobs/report", fmt.Sprint(newer))
	began = time.Now()
	out, code := r.run(ex.argv...)
	t.Logf("second run, after the claim: exit %d, %v: %s", code, time.Since(began).Round(time.Millisecond), strings.TrimSpace(out))
	if code != wantCode || !strings.Contains(out, wantErr) {
		t.Fatalf("second run after a newer holder's claim: exit %d, want %d with %q; its output:\n%s", code, wantCode, wantErr, out)
	}
	if n := count(t, db, `SELECT count(*) FROM reports`); n != 1 {
		t.Fatalf("after the refused run reports holds %d rows, want still 1", n)
	}
	if seen := count(t, db, `SELECT token FROM zklock_fence WHERE name = '/jobs/report'`); seen != newer {
		t.Fatalf("after the refused run the fence records token %d, want the claim's %d", seen, newer)
	}
}

// example is a code block of docs/fencing.md: its file name and the
// command that runs it, both from its first lines ("# report.py: run as
// zklock exec /jobs/report -- python3 report.py reports.db").
type example struct {
	name     string
	code     string
	argv     []string
	postgres bool // the store is PostgreSQL
}

// docExample returns the block of lang whose text begins with head.
func docExample(t *testing.T, doc []byte, lang, head string) example {
	t.Helper()
	var blocks []string
	var cur *strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur == nil && line == "```"+lang:
			cur = new(strings.Builder)
		case cur != nil && line == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	var found []string
	for _, b := range blocks {
		if strings.HasPrefix(b, head) {
			found = append(found, b)
		}
	}
	if len(found) != 1 {
		t.Fatalf("docs/fencing.md: %d ```%s blocks begin with %q, want 1", len(found), lang, head)
	}
	code := found[0]
	// The block's caption line: "<comment> NAME: run as  COMMAND  (remark)".
	caption := strings.Split(code[strings.LastIndex(head, "\n")+1:], "\n")[0]
	name, how, ok := strings.Cut(caption, ": run as ")
	if !ok {
		t.Fatalf("docs/fencing.md: the %s example's caption %q does not say how it is run (\": run as \")", lang, caption)
	}
	name = strings.Fields(name)[len(strings.Fields(name))-1]
	how, _, _ = strings.Cut(strings.TrimSpace(how), "  ")
	argv := strings.Fields(how)
	if len(argv) < 5 || strings.Join(argv[:4], " ") != "zklock exec /jobs/report --" {
		t.Fatalf("docs/fencing.md: the %s example is run as %q, want zklock exec /jobs/report -- ...", name, how)
	}
	return example{name: name, code: code, argv: argv}
}

func (ex example) write(t *testing.T, dir string, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, ex.name), []byte(ex.code), perm); err != nil {
		t.Fatal(err)
	}
}

// docRunner runs commands in dir with env, where bin (on env's PATH) holds
// zklock and zklock-fence.
type docRunner struct {
	t   *testing.T
	dir string
	env []string
	bin string
}

// run runs argv (argv[0] found in bin first, as env's PATH finds it) and
// returns its output, stdout and stderr together, and its exit status.
func (r docRunner) run(argv ...string) (string, int) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	path := argv[0]
	if p := filepath.Join(r.bin, path); !strings.Contains(path, "/") && executable(p) {
		path = p
	}
	cmd := exec.CommandContext(ctx, path, argv[1:]...)
	cmd.Dir, cmd.Env = r.dir, r.env
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit) && ctx.Err() == nil:
		return out.String(), exit.ExitCode()
	}
	r.t.Fatalf("%s: %v (bound 60 s: %v); its output:\n%s", strings.Join(argv, " "), err, ctx.Err(), out.String())
	return "", 0
}

// ok runs argv and fails the test unless it exits 0.
func (r docRunner) ok(argv ...string) string {
	r.t.Helper()
	out, code := r.run(argv...)
	if code != 0 {
		r.t.Fatalf("%s: exit %d; its output:\n%s", strings.Join(argv, " "), code, out)
	}
	return out
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// buildCLIs builds zklock and zklock-fence, as users install them, into a
// directory of t's and returns it.
func buildCLIs(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	// A cold build cache compiles modernc.org/sqlite: minutes on two cores.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	began := time.Now()
	args := []string{"build", "-o", bin + string(os.PathSeparator)}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.CommandContext(ctx, "go", append(args,
		"github.com/zklock/zklock/cmd/zklock", "github.com/zklock/zklock/fence/cmd/zklock-fence")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build zklock zklock-fence: %v\n%s", err, out)
	}
	t.Logf("built zklock and zklock-fence in %v", time.Since(began).Round(time.Millisecond))
	return bin
}

// nodeModules is the node_modules holding pg that scripts/install-databases.sh
// installs.
func nodeModules(t *testing.T) string {
	t.Helper()
	prefix := os.Getenv("ZKLOCK_NODE_PREFIX")
	if prefix == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatal(err)
		}
		prefix = filepath.Join(home, ".cache", "zklock", "node")
	}
	modules := filepath.Join(prefix, "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "pg", "package.json")); err != nil {
		t.Fatalf("Node's pg is not in %s: run scripts/install-databases.sh (%v)", modules, err)
	}
	return modules
}

// postgresDatabase creates an empty database on the shared PostgreSQL and
// returns its URL and a handle on it.
func postgresDatabase(t *testing.T) (string, *sql.DB) {
	t.Helper()
	name := newDatabase(t, "postgres", "pgx")
	return dsnFor(server(t, "postgres"), name), openOn(t, "postgres", "pgx", name)
}

func count(t *testing.T, db *sql.DB, query string) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}
