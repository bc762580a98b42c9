package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The runners of the docs' client examples, as a user runs them: Python
// with the checkout's client on PYTHONPATH, and Node with an .mjs file
// beside node_modules/zklock (as `npm install ./clients/node` lays it out).

// runPython runs code as the file name in dir and returns its output.
func runPython(t *testing.T, root, dir, name, code string) string {
	t.Helper()
	file := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(file, []byte(code), 0o644))
	cmd := exec.Command("python3", file)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(root, "clients/python/src"))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return string(out)
}

// runNode runs code as the module name in dir/node and returns its output.
func runNode(t *testing.T, root, dir, name, code string) string {
	t.Helper()
	nd := filepath.Join(dir, "node")
	require.NoError(t, os.MkdirAll(filepath.Join(nd, "node_modules"), 0o755))
	_ = os.Symlink(filepath.Join(root, "clients/node"), filepath.Join(nd, "node_modules/zklock")) // made by the first call
	file := filepath.Join(nd, name)
	require.NoError(t, os.WriteFile(file, []byte(code), 0o644))
	out, err := exec.Command("node", file).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return string(out)
}
