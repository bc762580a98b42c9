//go:build unix

package dbserver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// postgresQuit is PostgreSQL's immediate shutdown: the postmaster ends its
// children and removes its shared memory, without a checkpoint.
var postgresQuit os.Signal = syscall.SIGQUIT

// setProcAttr puts the server in its own process group (a terminal's ^C
// reaches the test binary, not the server) and, on Linux, has the kernel
// send it sig should the test binary die without stopping it.
func setProcAttr(cmd *exec.Cmd, sig os.Signal) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setPdeathsig(cmd.SysProcAttr, sig)
}

func signalProcess(p *os.Process, sig os.Signal) { p.Signal(sig) }

// killGroup kills the server's process group, and the server itself should
// it have left the group.
func killGroup(p *os.Process) {
	syscall.Kill(-p.Pid, syscall.SIGKILL)
	p.Kill()
}

// runAs is the user a server that refuses root runs as; nil runs commands
// as the current user.
type runAs struct {
	name     string
	uid, gid uint32
}

// unprivileged returns, when the process runs as root, the user nobody,
// and nil otherwise.
func unprivileged() (*runAs, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("dbserver: PostgreSQL refuses to run as root, and there is no user nobody to run it as: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("dbserver: user nobody's ids %q, %q are not numbers", u.Uid, u.Gid)
	}
	return &runAs{u.Username, uint32(uid), uint32(gid)}, nil
}

// apply makes cmd run as the user, with no supplementary groups.
func (r *runAs) apply(cmd *exec.Cmd) {
	if r == nil {
		return
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: r.uid, Gid: r.gid}
}

// own hands dir to the user.
func (r *runAs) own(dir string) error {
	if r == nil {
		return nil
	}
	if err := os.Chown(dir, int(r.uid), int(r.gid)); err != nil {
		return fmt.Errorf("dbserver: handing %s to %s: %w", dir, r.name, err)
	}
	return nil
}

// lockDir marks dir as in use for as long as the returned file stays open
// (closing it, or the process's end, unlocks it): the lock file is locked
// under another name, then renamed, so that sweep never sees it unlocked.
func lockDir(dir string) (*os.File, error) {
	tmp := filepath.Join(dir, lockFile+".new")
	f, err := os.Create(tmp)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, lockFile)); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// lockWait locks the file path, made if need be, waiting for whoever holds
// it as long as ctx allows; closing the file unlocks it.
func lockWait(ctx context.Context, path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for the lock %s: %w", path, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return f, nil
}

// sweep removes the directories matching pattern whose lock file nobody
// holds: those of servers whose test binary died before stopping them
// (the servers died with it: see setProcAttr), or of templates whose
// maker died before finishing them.
func sweep(pattern string) {
	dirs, _ := filepath.Glob(pattern)
	for _, dir := range dirs {
		f, err := os.Open(filepath.Join(dir, lockFile))
		if err != nil {
			continue // not ours, being made, or being removed
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			os.RemoveAll(dir)
		}
		f.Close()
	}
}
