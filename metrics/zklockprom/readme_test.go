package zklockprom_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// metrics/README.md's relative links resolve, and it names each adapter's
// module path as its go.mod does.
func TestReadme(t *testing.T) {
	data, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	text := string(data)
	links := regexp.MustCompile(`\]\(([^)#]+)(#[^)]*)?\)`).FindAllStringSubmatch(text, -1)
	require.NotEmpty(t, links)
	for _, l := range links {
		if strings.Contains(l[1], "://") {
			continue
		}
		_, err := os.Stat(filepath.Join("..", l[1]))
		require.NoError(t, err, "metrics/README.md links to %s", l[1])
	}
	for _, dir := range []string{"zklockprom", "zklockotel"} {
		mod, err := os.ReadFile(filepath.Join("..", dir, "go.mod"))
		require.NoError(t, err)
		path := strings.TrimSpace(strings.TrimPrefix(strings.SplitN(string(mod), "\n", 2)[0], "module "))
		require.Contains(t, text, `"`+path+`"`, "the README imports %s", dir)
		require.Contains(t, text, dir+".New(", "the README shows %s.New", dir)
	}
}
