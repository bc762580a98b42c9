// Package doccheck checks the user documents: every link resolves, every Go
// snippet compiles (snippets_test.go), the install steps work, and measured
// figures live in one place.
// It has only tests, which need no server.
package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// root is the repository's top directory.
const root = "../.."

// documents are the user documents: the README, the changelog, docs/.
func documents(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, docs)
	return append([]string{filepath.Join(root, "README.md"), filepath.Join(root, "CHANGELOG.md")}, docs...)
}

var (
	link    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile(`(?m)^#+ (.+)$`)
	fence   = regexp.MustCompile("(?s)```.*?```")
)

// slug is GitHub's anchor for a heading.
func slug(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	var b strings.Builder
	for _, r := range h {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || ('a' <= r && r <= 'z') || ('0' <= r && r <= '9') || r > 0x7f:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func anchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	out := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(string(data), ""), -1) {
		out[slug(strings.ReplaceAll(m[1], "`", ""))] = true
	}
	return out
}

// Every relative link names a file that exists, and every anchor a heading
// of its file.
func TestLinksResolve(t *testing.T) {
	t.Parallel()
	checked := 0
	for _, doc := range documents(t) {
		data, err := os.ReadFile(doc)
		require.NoError(t, err)
		text := fence.ReplaceAllString(string(data), "")
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := doc
			if file != "" {
				path = filepath.Join(filepath.Dir(doc), file)
				_, err := os.Stat(path)
				require.NoError(t, err, "%s links to %s", doc, target)
			}
			if anchor != "" {
				require.True(t, anchors(t, path)[anchor], "%s links to %s: no such heading", doc, target)
			}
			checked++
		}
	}
	require.Greater(t, checked, 20, "the link pattern found too few links")
}

// ratio is a measured ratio against zk.Lock or another run ("1.30 ×").
var ratio = regexp.MustCompile(`\b\d+\.\d+ ×`)

// Measured figures live in one document each, so that no figure appears in
// two places with two values: performance ratios in docs/performance.md,
// torture results in docs/torture.md.
func TestFiguresLiveInOnePlace(t *testing.T) {
	t.Parallel()
	for _, doc := range documents(t) {
		data, err := os.ReadFile(doc)
		require.NoError(t, err)
		text := string(data)
		base := filepath.Base(doc)
		if base != "performance.md" {
			require.Empty(t, ratio.FindAllString(text, -1), "%s quotes a measured ratio: link to docs/performance.md instead", doc)
		}
		if base != "torture.md" {
			require.False(t, strings.Contains(text, "violations="), "%s quotes torture results: link to docs/torture.md instead", doc)
		}
		for _, dev := range []string{"this machine", "see the issue", "closing note"} {
			require.False(t, strings.Contains(strings.ToLower(text), dev), "%s has a development note: %q", doc, dev)
		}
	}
}
