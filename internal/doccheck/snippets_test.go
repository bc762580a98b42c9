package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// snippet is one ```go block of a document.
type snippet struct {
	doc  string // the document, relative to the repository
	line int    // the line of its opening fence
	code string
}

var goFence = regexp.MustCompile("(?s)```go\n(.*?)```")

// goSnippets returns every Go snippet of README.md and docs/.
func goSnippets(t *testing.T) []snippet {
	t.Helper()
	var out []snippet
	for _, doc := range documents(t) {
		data, err := os.ReadFile(doc)
		require.NoError(t, err)
		text := string(data)
		rel, _ := filepath.Rel(root, doc)
		for _, m := range goFence.FindAllStringSubmatchIndex(text, -1) {
			out = append(out, snippet{doc: rel, line: 1 + strings.Count(text[:m[0]], "\n"), code: text[m[2]:m[3]]})
		}
	}
	return out
}

// packages a fragment may use without importing them, by the name it uses.
var implicitImports = map[string]string{
	"context.":    "context",
	"errors.":     "errors",
	"fmt.":        "fmt",
	"log.":        "log",
	"time.":       "time",
	"zk.":         "github.com/go-zookeeper/zk",
	"zklock.":     "github.com/zklock/zklock",
	"prometheus.": "github.com/prometheus/client_golang/prometheus",
	"otel.":       "go.opentelemetry.io/otel",
	"fence.":      "github.com/zklock/zklock/fence",
}

var importLine = regexp.MustCompile(`(?m)^import "[^"]+"\n`)

// source turns a snippet into a Go file. A whole program stays as it is; a
// fragment becomes the body of a function that has ctx, client and servers
// in scope, with the imports it names and those it uses.
func (s snippet) source() string {
	if strings.HasPrefix(s.code, "package ") {
		return s.code
	}
	imports := map[string]bool{"context": true, "github.com/zklock/zklock": true}
	for _, m := range importLine.FindAllString(s.code, -1) {
		imports[strings.Trim(strings.TrimPrefix(strings.TrimSpace(m), "import "), `"`)] = true
	}
	body := importLine.ReplaceAllString(s.code, "")
	for name, path := range implicitImports {
		if regexp.MustCompile(`\b` + regexp.QuoteMeta(name)).MatchString(body) {
			imports[path] = true
		}
	}
	var b strings.Builder
	b.WriteString("package snippet\n\nimport (\n")
	for p := range imports {
		b.WriteString("\t\"" + p + "\"\n")
	}
	b.WriteString(")\n\nvar client *zklock.Client\n\nfunc snippet(ctx context.Context, servers []string) {\n")
	b.WriteString("\t_, _, _ = ctx, client, servers\n")
	b.WriteString(body)
	b.WriteString("}\n")
	return b.String()
}

// moduleOf is the module directory a snippet compiles in: the metrics
// adapters and the fence are modules of their own.
func (s snippet) moduleOf() string {
	if strings.Contains(s.code, "zklock/fence") {
		return filepath.Join(root, "fence")
	}
	for _, m := range []string{"zklockprom", "zklockotel"} {
		if strings.Contains(s.code, "metrics/"+m) {
			return filepath.Join(root, "metrics", m)
		}
	}
	return "."
}

// unused is the one compile error a fragment may have: it shows a call's
// results without going on to use every one.
var unused = regexp.MustCompile(`: declared and not used: `)

// Every Go snippet in README.md and docs/ compiles: a whole program as it
// is, a fragment as the body of a function with ctx, client and servers.
func TestGoSnippetsCompile(t *testing.T) {
	t.Parallel()
	snippets := goSnippets(t)
	require.GreaterOrEqual(t, len(snippets), 6, "the fence pattern found too few snippets")
	for _, s := range snippets {
		dir, err := os.MkdirTemp(s.moduleOf(), "snippet-")
		require.NoError(t, err)
		t.Cleanup(func() { os.RemoveAll(dir) })
		require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(s.source()), 0o644))
		cmd := exec.Command("go", "build", "-o", os.DevNull, ".")
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err == nil {
			continue
		}
		var errs []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			// The go command's progress (modules it downloads on a fresh
			// machine) and a fragment's unused results are not errors.
			if !strings.HasPrefix(l, "# ") && !strings.HasPrefix(l, "go: downloading ") && !unused.MatchString(l) {
				errs = append(errs, l)
			}
		}
		if len(errs) > 0 {
			t.Errorf("the snippet at %s:%d does not compile:\n%s\n%s", s.doc, s.line, strings.Join(errs, "\n"), s.source())
		}
	}
}

// No snippet exits the process after a defer: log.Fatal and os.Exit skip
// the deferred calls, a Release or a Close among them.
func TestGoSnippetsDoNotExitPastDefers(t *testing.T) {
	t.Parallel()
	for _, s := range goSnippets(t) {
		f, err := parser.ParseFile(token.NewFileSet(), "snippet.go", s.source(), 0)
		if err != nil {
			continue // TestGoSnippetsCompile reports it
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var body *ast.BlockStmt
			switch fn := n.(type) {
			case *ast.FuncDecl:
				body = fn.Body
			case *ast.FuncLit:
				body = fn.Body
			}
			if body != nil {
				if call := exitAfterDefer(body); call != "" {
					t.Errorf("the snippet at %s:%d calls %s after a defer, which then never runs", s.doc, s.line, call)
				}
			}
			return true
		})
	}
}

// exitAfterDefer returns the first log.Fatal* or os.Exit call that follows a
// defer in the function body (not counting nested functions), or "".
func exitAfterDefer(body *ast.BlockStmt) string {
	deferred, found := false, ""
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.DeferStmt:
			deferred = true
			return false
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok || found != "" {
				return true
			}
			pkg, ok := sel.X.(*ast.Ident)
			if ok && deferred && ((pkg.Name == "log" && strings.HasPrefix(sel.Sel.Name, "Fatal")) || (pkg.Name == "os" && sel.Sel.Name == "Exit")) {
				found = pkg.Name + "." + sel.Sel.Name
			}
		}
		return true
	})
	return found
}

// No snippet waits on itself: a read lease of a read/write lock is released
// before the same client asks for the write lease (it would queue behind its
// own reader for ever).
func TestGoSnippetsDoNotWaitOnThemselves(t *testing.T) {
	t.Parallel()
	for _, s := range goSnippets(t) {
		f, err := parser.ParseFile(token.NewFileSet(), "snippet.go", s.source(), 0)
		if err != nil {
			continue // TestGoSnippetsCompile reports it
		}
		readers := map[string]string{} // read lease variable -> its RWMutex
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				if rw, method := calledOn(n.Rhs); method == "AcquireRead" || method == "TryAcquireRead" {
					if id, ok := n.Lhs[0].(*ast.Ident); ok {
						readers[id.Name] = rw
					}
				}
			case *ast.CallExpr:
				switch rw, method := calledOn([]ast.Expr{n}); method {
				case "Release":
					delete(readers, rw)
				case "AcquireWrite", "TryAcquireWrite":
					for r, of := range readers {
						if of == rw {
							t.Errorf("the snippet at %s:%d asks %s for the write lease while its read lease %s holds: it waits on itself", s.doc, s.line, rw, r)
						}
					}
				}
			}
			return true
		})
	}
}

// calledOn returns, for exprs holding one call x.M(...), x and M.
func calledOn(exprs []ast.Expr) (string, string) {
	if len(exprs) != 1 {
		return "", ""
	}
	call, ok := exprs[0].(*ast.CallExpr)
	if !ok {
		return "", ""
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return "", ""
	}
	x, ok := sel.X.(*ast.Ident)
	if !ok {
		return "", ""
	}
	return x.Name, sel.Sel.Name
}

// The README's install section names what users will type, and the
// release rehearsal (release/rehearsal_test.go) runs exactly that.
func TestInstallAsDocumented(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	_, install, ok := strings.Cut(string(data), "## Install")
	require.True(t, ok)
	install, _, _ = strings.Cut(install, "\n## ")
	// What a user types is what the release rehearsal (release/, make
	// rehearse) installs and builds from a proxy, with no replace.
	for _, line := range []string{
		"go get github.com/zklock/zklock@latest",
		"go install github.com/zklock/zklock/cmd/zklock@latest",
		"go get github.com/zklock/zklock/metrics/zklockprom@latest",
	} {
		require.Contains(t, install, line)
	}
	require.NotContains(t, install, "replace ", "the install section asks for no replace")
	rehearsal, err := os.ReadFile(filepath.Join(root, "release", "rehearsal_test.go"))
	require.NoError(t, err)
	for _, want := range []string{`"install", "github.com/zklock/zklock/cmd/zklock@"`, `"github.com/zklock/zklock@"`, `"github.com/zklock/zklock/metrics/zklockprom"`} {
		require.Contains(t, string(rehearsal), want, "the rehearsal runs what the install section says")
	}
}
