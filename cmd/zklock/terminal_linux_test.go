package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// openPTY opens a pseudo-terminal: the master end, and the name of the
// slave end.
func openPTY(t *testing.T) (*os.File, string) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	var unlock int32
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock)))
	require.Zero(t, errno)
	var n uint32
	_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n)))
	require.Zero(t, errno)
	return m, fmt.Sprintf("/dev/pts/%d", n)
}

// A command that reads the terminal works as under flock(1): zklock, in the
// terminal's foreground, hands the foreground to the command's process
// group (it was stopped by SIGTTIN, while zklock held the lock and said
// nothing), takes the terminal back after it, and releases the lock.
func TestExecCommandReadsTheTerminal(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	master, slaveName := openPTY(t)
	slave, err := os.OpenFile(slaveName, os.O_RDWR, 0)
	require.NoError(t, err)
	defer slave.Close()
	out := filepath.Join(t.TempDir(), "out")
	outf, err := os.Create(out)
	require.NoError(t, err)
	defer outf.Close()

	// Twice in one shell: the second finds the terminal's foreground back
	// with the shell's group (zklock's), or its command would be stopped.
	script := `"$0" exec "$1" -- sh -c 'read a; echo "got $a"' && "$0" exec "$1" -- sh -c 'read b; echo "then $b"'`
	cmd := exec.Command("sh", "-c", script, bin, path)
	cmd.Env = append(os.Environ(), envServers+"="+strings.Join(cluster.Addrs(), ","), "GORACE=atexit_sleep_ms=0")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, outf, outf
	// zklock leads a session whose controlling terminal is the pty, in its
	// foreground, as a shell's job does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	require.NoError(t, cmd.Start())
	_, err = master.Write([]byte("hello\nagain\n")) // the terminal keeps it until the commands read it
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		b, _ := os.ReadFile(out)
		require.NoError(t, err, "%s", b)
		require.Equal(t, "got hello\nthen again\n", string(b))
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		b, _ := os.ReadFile(out)
		t.Fatalf("zklock exec with a command reading the terminal still runs after 20s: the command is stopped; output: %q", b)
	}
	require.Empty(t, contendersOf(t, connect(t), path))
}
