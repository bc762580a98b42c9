package lockservice_test

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestErrorTableListsEveryCode: docs/serve.md's error table has a row for
// every (status, code) the service's code can answer, and no row for one it
// cannot. The code's answers are read off its source: every status written
// with a code beside it (writeError, failure) and every lease end (410).
func TestErrorTableListsEveryCode(t *testing.T) {
	t.Parallel()
	code := answersInSource(t)
	doc := errorTable(t)
	for a := range code {
		require.Contains(t, doc, a, "the service answers %s, which docs/serve.md's error table lacks", a)
	}
	for a := range doc {
		require.Contains(t, code, a, "docs/serve.md's error table lists %s, which the service never answers", a)
	}
	t.Logf("%d (status, code) answers, each with its row", len(code))
}

// answersInSource returns "status code" for every answer the package's
// non-test source can write.
func answersInSource(t *testing.T) map[string]bool {
	t.Helper()
	statusCode := regexp.MustCompile(`http\.(Status\w+),\s*"([a-z_]+)"`)
	leaseEnd := regexp.MustCompile(`code\w+\s*=\s*"([a-z_]+)"`)
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	out := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range statusCode.FindAllStringSubmatch(string(b), -1) {
			out[strconv.Itoa(statusOf(t, m[1]))+" "+m[2]] = true
		}
		for _, m := range leaseEnd.FindAllStringSubmatch(string(b), -1) {
			out[strconv.Itoa(http.StatusGone)+" "+m[1]] = true
		}
	}
	require.NotEmpty(t, out)
	return out
}

// statusOf is the number of net/http's constant name.
func statusOf(t *testing.T, name string) int {
	t.Helper()
	for code := 100; code < 600; code++ {
		text := http.StatusText(code)
		if text == "" {
			continue
		}
		if "Status"+strings.NewReplacer(" ", "", "-", "", "'", "").Replace(text) == name ||
			name == "StatusRequestEntityTooLarge" && code == 413 {
			return code
		}
	}
	t.Fatalf("unknown status constant %s", name)
	return 0
}

// errorTable returns "status code" for every row of docs/serve.md's error
// table.
func errorTable(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../../../../docs/serve.md")
	require.NoError(t, err)
	doc := string(b)
	i := strings.Index(doc, "### Errors")
	require.GreaterOrEqual(t, i, 0, "docs/serve.md has no Errors section")
	row := regexp.MustCompile("(?m)^\\| (\\d{3}) \\| `([a-z_]+)` \\|")
	out := map[string]bool{}
	section := doc[i:]
	if j := strings.Index(section[4:], "\n## "); j >= 0 {
		section = section[:j+4]
	}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		out[m[1]+" "+m[2]] = true
	}
	require.NotEmpty(t, out, "docs/serve.md's error table has no rows")
	return out
}
