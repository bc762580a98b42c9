package zkserver

import "syscall"

// setPdeathsig: SIGKILL the server when the thread that started it (in
// practice, the test binary) goes away.
func setPdeathsig(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
