//go:build !linux

package main

import (
	"context"
	"net"
	"syscall"
	"time"
)

// peerContext records nothing where SO_PEERCRED is missing: the owner
// records of Unix-socket callers name only the caller.
func peerContext(ctx context.Context, _ net.Conn) context.Context { return ctx }

// setUserTimeout does nothing where TCP_USER_TIMEOUT is missing: a caller
// whose host vanished is found by TCP keep-alive once nothing sent is
// unacknowledged, or when retransmissions give up.
func setUserTimeout(syscall.RawConn, time.Duration) error { return nil }
