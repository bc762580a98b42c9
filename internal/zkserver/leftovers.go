package zkserver

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A test binary that dies before its cleanups run (a panic on a goroutine,
// the -timeout alarm, a kill) takes its servers with it (they are started
// with a parent-death signal where the system has one) but leaves their
// directory, zktest-* in the temporary directory. Start therefore writes
// who owns each directory into it, and sweeps, before it makes a new one,
// every zktest-* directory whose owner is gone.

// ownerFile names, inside a zktest-* directory, the process that made it:
// its pid and, where the system tells it, its start time, so that a reused
// pid is not taken for the owner.
const ownerFile = "owner"

// writeOwner records the current process as the owner of dir.
func writeOwner(dir string) error {
	pid := os.Getpid()
	return os.WriteFile(filepath.Join(dir, ownerFile), []byte(fmt.Sprintf("%d %s\n", pid, procStart(pid))), 0o644)
}

// ownerGone reports whether dir's recorded owner has exited. A directory
// without a readable record (one made a moment ago, before its record was
// written, or by an older zktest) is never taken for abandoned.
func ownerGone(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return false
	}
	if !processExists(pid) {
		return true
	}
	if len(f) > 1 && f[1] != "" {
		if now := procStart(pid); now != "" && now != f[1] {
			return true // the pid now names another process
		}
	}
	return false
}

// sweepLeftovers removes the zktest-* directories in the temporary
// directory whose owner has exited, and returns them.
func sweepLeftovers() []string {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "zktest-*"))
	var swept []string
	for _, d := range dirs {
		if fi, err := os.Lstat(d); err != nil || !fi.IsDir() || !ownerGone(d) {
			continue
		}
		if os.RemoveAll(d) == nil {
			swept = append(swept, d)
		}
	}
	return swept
}

// procStart is the start time of process pid in clock ticks since boot
// (field 22 of /proc/pid/stat), or "" where there is no /proc.
func procStart(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 { // f[0] is field 3, the state
		return ""
	}
	return f[19]
}
