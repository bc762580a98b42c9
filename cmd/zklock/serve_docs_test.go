package main

// Every code example of docs/serve.md, run as written: only the service's
// address, the socket and token file paths, and the ZooKeeper servers are
// the test's.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
)

// docBlock is one fenced code block of a document.
type docBlock struct{ lang, code string }

var fenced = regexp.MustCompile("(?s)```(\\w*)\\n(.*?)```")

func docBlocks(t *testing.T, file string) []docBlock {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	var out []docBlock
	for _, m := range fenced.FindAllStringSubmatch(string(b), -1) {
		out = append(out, docBlock{m[1], m[2]})
	}
	return out
}

// TestServeDocExamples runs every sh, python and js block of docs/serve.md
// (a text block is a sample of output). Each block is run by exactly one of
// the runners below; a block none of them knows fails the test, so an
// example cannot be added without being run.
func TestServeDocExamples(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	dir := t.TempDir()
	servers := "ZKLOCK_SERVERS=" + strings.Join(cluster.Addrs(), ",")
	svc := start(t, "serve", "--listen", "127.0.0.1:0", "--prefix", "/locks", "--heartbeat", "200ms")
	url := "http://" + httpAddrOf(t, svc.stdout, "listening on http://")
	sock := filepath.Join(dir, "zklock.sock")
	usvc := start(t, "serve", "--unix", sock)
	httpAddrOf(t, usvc.stdout, "listening on unix:")
	local := func(code string) string {
		return strings.NewReplacer("http://127.0.0.1:7070", url, "/run/zklock.sock", sock).Replace(code)
	}
	shell := func(t *testing.T, code string, env ...string) string {
		t.Helper()
		cmd := exec.Command("sh", "-ec", code)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), append([]string{"PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH"), servers}, env...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s\n%s", code, out)
		return string(out)
	}
	need := func(t *testing.T, interpreter, how string) {
		if _, err := exec.LookPath(interpreter); err != nil {
			t.Fatalf("%s is not installed (no %s in $PATH), so this example cannot run: %s (make test installs it)", interpreter, interpreter, how)
		}
	}
	c := connect(t)

	runners := []struct {
		name, marker string
		run          func(t *testing.T, code string)
	}{
		{"starting the service", "zklock serve --prefix /locks", func(t *testing.T, code string) {
			tokens := filepath.Join(dir, "tokens")
			require.NoError(t, os.WriteFile(tokens, []byte("ops s3cret\n"), 0o600))
			for _, line := range strings.Split(strings.TrimSpace(code), "\n") {
				line, _, _ = strings.Cut(line, "#")
				args := strings.Fields(strings.NewReplacer(":7070", ":0", "/run/zklock.sock", filepath.Join(dir, "doc.sock"), "/etc/zklock/tokens", tokens).Replace(line))
				require.Equal(t, "zklock", args[0], line)
				if !strings.Contains(line, "--listen") && !strings.Contains(line, "--unix") {
					args = append(args, "--listen", "127.0.0.1:0") // the documented default, 127.0.0.1:7070, may be taken
				}
				p := start(t, args[1:]...)
				httpAddrOf(t, p.stdout, "listening on ")
				require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
				require.Equal(t, exitOK, p.wait(t, 20*time.Second), "%s: %s", line, p.errText())
			}
		}},
		{"python", `client.lock("/locks/report"`, func(t *testing.T, code string) {
			need(t, "python3", "install Python 3 (apt-get install python3)")
			out := runPython(t, root, dir, "example.py", local(code))
			require.Regexp(t, `(?m)^holding /locks/report, fencing token \d+\nreleased\n$`, out)
		}},
		{"node", `client.lock('/locks/report'`, func(t *testing.T, code string) {
			need(t, "node", "install Node.js 18 or later (apt-get install nodejs)")
			out := runNode(t, root, dir, "example.mjs", local(code))
			require.Regexp(t, `(?m)^holding /locks/report, fencing token \d+\nreleased\n$`, out)
		}},
		{"python lease", "client.lease(ttl=3)", func(t *testing.T, code string) {
			need(t, "python3", "install Python 3 (apt-get install python3)")
			out := runPython(t, root, dir, "lease.py", local(code))
			require.Regexp(t, `(?m)^holding /locks/nightly with a lease, fencing token \d+\nrevoked\n$`, out)
			require.Empty(t, waitQueue(t, c, "/locks/nightly", 0))
		}},
		{"node lease", "client.lease(3)", func(t *testing.T, code string) {
			need(t, "node", "install Node.js 18 or later (apt-get install nodejs)")
			out := runNode(t, root, dir, "lease.mjs", local(code))
			require.Regexp(t, `(?m)^holding /locks/nightly with a lease, fencing token \d+\nrevoked\n$`, out)
			require.Empty(t, waitQueue(t, c, "/locks/nightly", 0))
		}},
		{"a lease with curl", "/v1/lease/grant", func(t *testing.T, code string) {
			if _, err := exec.LookPath("curl"); err != nil {
				t.Fatal("curl is not installed: the curl examples need it; make interop (scripts/install-interop.sh) installs it")
			}
			// The steps: hold /locks/deploy for 3 TTLs, and show that it is held meanwhile.
			steps := "sleep 4; zklock status /locks/deploy"
			out := shell(t, strings.Replace(local(code), "# ... the steps that need /locks/deploy ...", steps, 1))
			require.Contains(t, out, "HOLDER", "the status in the middle shows the holder:\n%s", out)
			require.Contains(t, out, `"released":true`)
			require.Contains(t, out, `"revoked":true`)
			require.NotContains(t, out, "lease lost")
			require.Empty(t, waitQueue(t, c, "/locks/deploy", 0))
		}},
		{"a script's lock", "zklock exec --timeout 30s /locks/report", func(t *testing.T, code string) {
			job := filepath.Join(dir, "nightly-report.sh")
			require.NoError(t, os.WriteFile(job, []byte("#!/bin/sh\necho \"report under token $ZKLOCK_TOKEN\"\n"), 0o755))
			out := shell(t, code)
			require.Regexp(t, `^report under token \d+\nreport under token \d+\n$`, out, "both run while the lock is free")

			held := mutexHeld(t, c, "/locks/report")
			out = shell(t, strings.SplitN(strings.TrimSpace(code), "\n\n", 2)[1]) // the --try line
			require.Contains(t, out, "not run: exit 73")
			held()
		}},
		{"looking with curl", "curl -s 'http://127.0.0.1:7070/v1/lock/status?path=/locks/report'", func(t *testing.T, code string) {
			if _, err := exec.LookPath("curl"); err != nil {
				t.Fatal("curl is not installed: the curl examples need it; make interop (scripts/install-interop.sh) installs it")
			}
			release := mutexHeld(t, c, "/locks/report")
			defer release()
			out := shell(t, local(code), "ZKLOCK_SERVE_TOKEN=unused")
			require.Equal(t, 3, strings.Count(out, `"holder":true`), "the three status reads see the holder:\n%s", out)
			require.Contains(t, out, `"code":"no_leader"`)
			require.Contains(t, out, `"ok":true`)
			require.Len(t, waitQueue(t, c, "/locks/report", 1), 1, "no example took a lock")
		}},
	}
	ran := map[string]bool{}
	for i, b := range docBlocks(t, filepath.Join(root, "docs/serve.md")) {
		if b.lang == "text" {
			continue
		}
		var matched []int
		for j, r := range runners {
			if strings.Contains(b.code, r.marker) {
				matched = append(matched, j)
			}
		}
		require.Len(t, matched, 1, "docs/serve.md block %d (%s) must be run by exactly one runner of this test:\n%s", i, b.lang, b.code)
		r := runners[matched[0]]
		ran[r.name] = true
		t.Run(r.name, func(t *testing.T) { r.run(t, b.code) })
	}
	for _, r := range runners {
		require.True(t, ran[r.name], "docs/serve.md lost the example of %s", r.name)
	}
}

// mutexHeld takes the lock at path with c until the returned func.
func mutexHeld(t *testing.T, c *zklock.Client, path string) func() {
	t.Helper()
	m, err := c.NewMutex(path)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lease, err := m.Acquire(ctx)
	require.NoError(t, err)
	return func() { require.NoError(t, lease.Release(context.Background())) }
}
