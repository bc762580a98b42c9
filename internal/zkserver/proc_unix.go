//go:build unix

package zkserver

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// setProcAttr puts the server in its own process group, so that signals reach
// everything it started, and (on Linux) asks the kernel to kill it if the
// test binary dies without running its cleanups.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setPdeathsig(cmd.SysProcAttr)
}

func terminate(p *os.Process) error   { return signalGroup(p, syscall.SIGTERM) }
func killProcess(p *os.Process) error { return signalGroup(p, syscall.SIGKILL) }

func stopProcess(p *os.Process) error     { return signalGroup(p, syscall.SIGSTOP) }
func continueProcess(p *os.Process) error { return signalGroup(p, syscall.SIGCONT) }

func signalGroup(p *os.Process, sig syscall.Signal) error {
	err := syscall.Kill(-p.Pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return p.Signal(sig)
	}
	return err
}

// processExists reports whether process pid exists (a zombie counts: its
// parent has not reaped it yet).
func processExists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}
