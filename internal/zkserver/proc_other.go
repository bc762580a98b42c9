//go:build !unix

package zkserver

import (
	"os"
	"os/exec"
)

func setProcAttr(*exec.Cmd)           {}
func terminate(p *os.Process) error   { return p.Kill() }
func killProcess(p *os.Process) error { return p.Kill() }
