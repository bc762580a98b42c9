// Package release rehearses a release of this checkout: it builds the
// modules' zips as the version in ../VERSION, serves them from a file proxy
// beside the machine's own module cache, and installs and builds them in an
// empty GOPATH with no other proxy, as users will on release day
// (docs/releasing.md).
package release

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// modules are the published modules, by directory from the checkout's root.
var modules = []string{".", "metrics/zklockprom", "metrics/zklockotel", "fence"}

func TestReleaseRehearsal(t *testing.T) {
	root, err := filepath.Abs("..")
	must(t, err)
	version := strings.TrimSpace(string(read(t, filepath.Join(root, "VERSION"))))
	proxy := t.TempDir()
	for _, dir := range modules {
		publish(t, proxy, filepath.Join(root, dir), version)
		prefetch(t, filepath.Join(root, dir))
	}
	home := t.TempDir()
	env := userEnv(t, home, proxy)

	// The command-line tool, the way Go tools are installed.
	run(t, home, env, "go", "install", "github.com/zklock/zklock/cmd/zklock@"+version)
	out := run(t, home, env, filepath.Join(home, "gopath", "bin", "zklock"), "version")
	if !strings.Contains(out, version) {
		t.Fatalf("zklock version printed %q, want %s in it", out, version)
	}

	// A fresh module with the README's quick start.
	app := filepath.Join(home, "app")
	newModule(t, app, env, quickStart(t, root), "github.com/zklock/zklock@"+version, "github.com/zklock/zklock/fence@"+version, "github.com/jackc/pgx/v5/stdlib")

	// Each metrics module and the fence, at the same version.
	for _, m := range []struct{ pkg, use string }{
		{"github.com/zklock/zklock/metrics/zklockprom", "zklockprom.New(nil)"},
		{"github.com/zklock/zklock/metrics/zklockotel", "zklockotel.New(nil)"},
		{"github.com/zklock/zklock/fence", "fence.New(nil, fence.Postgres), fence.ErrStale"},
	} {
		name := filepath.Base(m.pkg)
		src := "package main\n\nimport \"" + m.pkg + "\"\n\nvar _, _ = " + m.use + "\n\nfunc main() {}\n"
		newModule(t, filepath.Join(home, name), env, src, m.pkg+"@"+version)
	}
}

// publish writes dir's module at version into the file proxy: its zip (as
// the module proxy would build it: nested modules and what Go ignores left
// out), go.mod, info and list. A go.mod with a replace is refused: it would
// build differently for users.
func publish(t *testing.T, proxy, dir, version string) {
	t.Helper()
	gomod := read(t, filepath.Join(dir, "go.mod"))
	f, err := modfile.Parse("go.mod", gomod, nil)
	must(t, err)
	if len(f.Replace) > 0 {
		t.Fatalf("%s/go.mod has a replace directive: users would build %s differently (put it in go.work)", dir, f.Module.Mod.Path)
	}
	mv := module.Version{Path: f.Module.Mod.Path, Version: version}
	esc, err := module.EscapePath(mv.Path)
	must(t, err)
	at := filepath.Join(proxy, filepath.FromSlash(esc), "@v")
	must(t, os.MkdirAll(at, 0o755))
	z, err := os.Create(filepath.Join(at, version+".zip"))
	must(t, err)
	must(t, zip.CreateFromDir(z, mv, dir))
	must(t, z.Close())
	must(t, os.WriteFile(filepath.Join(at, version+".mod"), gomod, 0o644))
	info, _ := json.Marshal(map[string]any{"Version": version, "Time": time.Now().UTC().Format(time.RFC3339)})
	must(t, os.WriteFile(filepath.Join(at, version+".info"), info, 0o644))
	must(t, os.WriteFile(filepath.Join(at, "list"), []byte(version+"\n"), 0o644))
}

// prefetch downloads into the machine's module cache, through the
// machine's usual proxy, every requirement of dir's module outside zklock:
// the upstream go-zookeeper a user gets, which this checkout's builds never
// fetch (go.work replaces it).
func prefetch(t *testing.T, dir string) {
	t.Helper()
	f, err := modfile.Parse("go.mod", read(t, filepath.Join(dir, "go.mod")), nil)
	must(t, err)
	args := []string{"mod", "download"}
	for _, r := range f.Require {
		if !strings.HasPrefix(r.Mod.Path, "github.com/zklock/zklock") {
			args = append(args, r.Mod.String())
		}
	}
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	run(t, t.TempDir(), env, "go", args...)
}

// userEnv is a user's environment: an empty GOPATH and module cache, no
// workspace, and only two file proxies: the release's and the machine's own
// module cache (every dependency was downloaded there by make test). Builds
// use -trimpath: without it a package's directory, a new temporary module
// cache each run, is part of its build cache key, and every rehearsal
// compiled every dependency again (35 s of CPU beside the tests; 9 s now).
// Which modules resolve, and how, is the same.
func userEnv(t *testing.T, home, proxy string) []string {
	cache := strings.TrimSpace(run(t, ".", nil, "go", "env", "GOMODCACHE"))
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "GO") {
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"GOPATH="+filepath.Join(home, "gopath"), "GOMODCACHE="+filepath.Join(home, "modcache"),
		"GOPROXY=file://"+proxy+",file://"+filepath.Join(cache, "cache", "download"),
		"GOSUMDB=off", "GOWORK=off", "GOFLAGS=-modcacherw -trimpath", "GOTOOLCHAIN=local",
		"GOCACHE="+strings.TrimSpace(run(t, ".", nil, "go", "env", "GOCACHE"))) // builds, not modules: safe to share
}

// newModule makes a module in dir with main.go src, gets what it imports,
// and builds it, as a user would after `go get`.
func newModule(t *testing.T, dir string, env []string, src string, get ...string) {
	t.Helper()
	must(t, os.MkdirAll(dir, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644))
	run(t, dir, env, "go", "mod", "init", "example.com/"+filepath.Base(dir))
	run(t, dir, env, "go", append([]string{"get"}, get...)...)
	run(t, dir, env, "go", "build", "./...")
	if strings.Contains(string(read(t, filepath.Join(dir, "go.mod"))), "replace") {
		t.Fatalf("%s needed a replace", dir)
	}
}

// quickStart is the README's first Go block.
func quickStart(t *testing.T, root string) string {
	m := regexp.MustCompile("(?s)```go\n(.*?)```").FindSubmatch(read(t, filepath.Join(root, "README.md")))
	if m == nil {
		t.Fatal("README.md has no Go block")
	}
	return string(m[1])
}

func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = env
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	return b
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
