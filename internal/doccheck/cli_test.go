package doccheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// exitCode is an exit code in an "Exit status" text.
var exitCode = regexp.MustCompile(`\b\d{1,3}\b`)

// section returns the part of doc under the heading "## name", up to the
// next heading of that level.
func section(doc, name string) string {
	_, s, ok := strings.Cut(doc, "\n## "+name+"\n")
	if !ok {
		return ""
	}
	s, _, _ = strings.Cut(s, "\n## ")
	return s
}

// docs/cli.md gives every exit code that 'zklock help <command>' gives.
func TestCLIDocExitCodes(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(root, "docs", "cli.md"))
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "zklock")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/zklock").CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, name := range []string{"exec", "status", "leader", "limit", "break", "server", "serve"} {
		help, err := exec.Command(bin, "help", name).Output()
		require.NoError(t, err)
		_, codes, ok := strings.Cut(string(help), "Exit status:")
		require.True(t, ok, "zklock help %s has no exit status", name)
		codes, _, _ = strings.Cut(codes, "\nExamples:")
		codes, _, _ = strings.Cut(codes, "\nFlags:")
		sec := section(string(data), name)
		require.NotEmpty(t, sec, "docs/cli.md has no section for %s", name)
		_, documented, ok := strings.Cut(sec, "Exit status")
		require.True(t, ok, "docs/cli.md does not give the exit status of %s", name)
		have := map[string]bool{}
		for _, c := range exitCode.FindAllString(documented, -1) {
			have[c] = true
		}
		for _, c := range exitCode.FindAllString(codes, -1) {
			require.True(t, have[c], "docs/cli.md does not give exit code %s of %s (zklock help %s does)", c, name, name)
		}
	}
}

// docs/cli.md states the exec flag combinations exec refuses.
func TestCLIDocFlagRules(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(root, "docs", "cli.md"))
	require.NoError(t, err)
	row := func(flag string) string {
		for _, l := range strings.Split(section(string(data), "exec"), "\n") {
			if strings.HasPrefix(l, "| `"+flag) {
				return l
			}
		}
		return ""
	}
	require.Contains(t, row("--value"), "excludes", "--value: say which flags it excludes")
	require.Contains(t, row("--value"), "`--try`")
	require.Contains(t, row("--and"), "exclusive", "--and: say that the paths it adds are exclusive locks")
}
