//go:build !unix

package dbserver

import (
	"context"
	"os"
	"os/exec"
)

var postgresQuit os.Signal = os.Kill

func setProcAttr(*exec.Cmd, os.Signal)         {}
func signalProcess(p *os.Process, _ os.Signal) { p.Kill() }
func killGroup(p *os.Process)                  { p.Kill() }

// runAs: every server runs as the current user.
type runAs struct{}

func unprivileged() (*runAs, error) { return nil, nil }
func (*runAs) apply(*exec.Cmd)      {}
func (*runAs) own(string) error     { return nil }

// lockDir, lockWait and sweep: without flock, leftover directories stay,
// and processes that start at once each make their own template.
func lockWait(context.Context, string) (*os.File, error) { return nil, nil }
func lockDir(string) (*os.File, error)                   { return nil, nil }
func sweep(string)                                       {}
