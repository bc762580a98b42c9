//go:build !unix

package zkserver

import (
	"errors"
	"os"
	"os/exec"
)

func setProcAttr(*exec.Cmd)           {}
func terminate(p *os.Process) error   { return p.Kill() }
func killProcess(p *os.Process) error { return p.Kill() }

var errNoFreeze = errors.New("freezing a process needs SIGSTOP (unix)")

func stopProcess(*os.Process) error     { return errNoFreeze }
func continueProcess(*os.Process) error { return errNoFreeze }
