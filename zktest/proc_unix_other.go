//go:build unix && !linux

package zktest

import "syscall"

func setPdeathsig(*syscall.SysProcAttr) {}
