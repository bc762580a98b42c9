package dbserver

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// postgresBin returns the directory holding postgres and initdb: that of
// the postgres on $PATH if initdb is beside it, else Debian's
// /usr/lib/postgresql/VERSION/bin of the highest version.
func postgresBin() (string, error) {
	if p, err := exec.LookPath("postgres"); err == nil {
		dir := filepath.Dir(p)
		if executable(filepath.Join(dir, "initdb")) {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionLess(dirs[j], dirs[i]) })
	for _, dir := range dirs {
		if executable(filepath.Join(dir, "postgres")) && executable(filepath.Join(dir, "initdb")) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("dbserver: PostgreSQL's postgres and initdb are neither on $PATH nor in /usr/lib/postgresql/*/bin: %s", install)
}

// versionLess orders /usr/lib/postgresql/VERSION/bin by VERSION, numerically
// (9.6 < 15 < 16).
func versionLess(a, b string) bool {
	va := strings.Split(filepath.Base(filepath.Dir(a)), ".")
	vb := strings.Split(filepath.Base(filepath.Dir(b)), ".")
	for i := 0; i < len(va) && i < len(vb); i++ {
		na, errA := strconv.Atoi(va[i])
		nb, errB := strconv.Atoi(vb[i])
		if errA != nil || errB != nil {
			return va[i] < vb[i]
		}
		if na != nb {
			return na < nb
		}
	}
	return len(va) < len(vb)
}

// findBin returns name's path: on $PATH, else in the fallback directories
// (Debian's places, which a user's $PATH may lack: /usr/sbin).
func findBin(name string, fallback ...string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range fallback {
		if p := filepath.Join(dir, name); executable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("dbserver: %s is neither on $PATH nor in %s: %s", name, strings.Join(fallback, ", "), install)
}

// executable reports whether path is a file someone may execute.
func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
