package main

import (
	"context"
	"net"
	"syscall"
	"time"

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

// setUserTimeout sets TCP_USER_TIMEOUT on a socket: the kernel ends the
// connection once data it sent has gone unacknowledged for d. Linux sends
// no keep-alive probe while sent data is unacknowledged, and a stream sends
// a heartbeat every few seconds, so without it a caller whose host vanished
// (no FIN, no RST) is found only when retransmissions give up (15 minutes
// and more). Accepted connections inherit it from the listening socket.
func setUserTimeout(c syscall.RawConn, d time.Duration) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout, int(d.Milliseconds()))
	})
	if err != nil {
		return err
	}
	return serr
}

// tcpUserTimeout is Linux's TCP_USER_TIMEOUT (linux/tcp.h), which package
// syscall does not name.
const tcpUserTimeout = 18
