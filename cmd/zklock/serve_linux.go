package main

import (
	"context"
	"net"
	"syscall"

	"github.com/zklock/zklock/cmd/zklock/internal/lockservice"
)

// peerContext records a Unix-socket caller's process and user (SO_PEERCRED)
// in its connection's context: its holdings' owner records name them.
func peerContext(ctx context.Context, c net.Conn) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return ctx
	}
	var cred *syscall.Ucred
	_ = raw.Control(func(fd uintptr) {
		cred, err = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	})
	if err != nil || cred == nil {
		return ctx
	}
	return lockservice.ContextWithPeer(ctx, lockservice.Peer{PID: int(cred.Pid), UID: int(cred.Uid)})
}
