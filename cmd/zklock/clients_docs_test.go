package main

// Every code example of the clients' READMEs, run as written: only the
// service's address and the ZooKeeper servers are the test's.

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestClientReadmeExamples runs every python and js block of
// clients/python/README.md and clients/node/README.md against a running
// service (the js ones as .mjs files beside node_modules/zklock, as
// `npm install ./clients/node` lays them out), and checks that every sh
// block is the install line TestClientPackagesInstall runs. A block no
// runner knows fails the test.
func TestClientReadmeExamples(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	dir := t.TempDir()
	svc := start(t, "serve", "--listen", "127.0.0.1:0", "--prefix", "/locks", "--heartbeat", "200ms")
	url := "http://" + httpAddrOf(t, svc.stdout, "listening on http://")
	local := func(code string) string { return strings.ReplaceAll(code, "http://127.0.0.1:7070", url) }
	c := connect(t)
	python := func(t *testing.T, code, want string) {
		require.Regexp(t, want, runPython(t, root, dir, "example.py", local(code)))
	}
	node := func(t *testing.T, code, want string) {
		require.Regexp(t, want, runNode(t, root, dir, "example.mjs", local(code)))
	}
	const lockOut, leaseOut = `^holding /locks/report, fencing token \d+\nreleased\n$`, `^holding /locks/nightly with a lease, fencing token \d+\nrevoked\n$`
	for _, readme := range []string{"clients/python/README.md", "clients/node/README.md"} {
		for i, b := range docBlocks(t, filepath.Join(root, readme)) {
			t.Run(filepath.Base(filepath.Dir(readme))+"/"+b.lang+"/"+string(rune('0'+i)), func(t *testing.T) {
				switch {
				case b.lang == "sh":
					line, _, _ := strings.Cut(strings.TrimSpace(b.code), "#")
					require.Contains(t, []string{"pip install ./clients/python", "npm install ./clients/node"}, strings.TrimSpace(line),
						"an install line TestClientPackagesInstall does not run")
				case b.lang == "python" && strings.Contains(b.code, "client.lease("):
					python(t, b.code, leaseOut)
				case b.lang == "python":
					python(t, b.code, lockOut)
				case b.lang == "js" && strings.Contains(b.code, "client.lease("):
					node(t, b.code, leaseOut)
				case b.lang == "js":
					node(t, b.code, lockOut)
				default:
					t.Fatalf("a %q block no runner knows:\n%s", b.lang, b.code)
				}
				require.Empty(t, waitQueue(t, c, "/locks/report", 0))
				require.Empty(t, waitQueue(t, c, "/locks/nightly", 0))
			})
		}
	}
}
