// Package benchkit holds what zklock's two measuring programs (zklock-bench
// and zklock-scale) both need of the machine and of a bare go-zookeeper
// client: CPU counters, and a raw session for zk.Lock and for setting up
// paths.
package benchkit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"
)

// ProcessCPU is the user and system CPU this process has used.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// PidCPU is the user and system CPU of process pid (Linux), 0 if unknown.
func PidCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: count from its ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// RawConn is a go-zookeeper connection, returned once it has a session; its
// log is discarded and its later events drained.
func RawConn(ctx context.Context, addrs []string, timeout time.Duration) (*zk.Conn, error) {
	conn, events, err := zk.Connect(addrs, timeout, zk.WithLogger(log.New(io.Discard, "", 0)), zk.WithLogInfo(false))
	if err != nil {
		return nil, err
	}
	for {
		select {
		case ev := <-events:
			if ev.State != zk.StateHasSession {
				continue
			}
			go func() {
				for range events {
				}
			}()
			return conn, nil
		case <-ctx.Done():
			conn.Close()
			return nil, ctx.Err()
		}
	}
}

// EnsurePath creates p and its ancestors where they are missing.
func EnsurePath(conn *zk.Conn, p string) error {
	for i := 1; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		_, err := conn.Create(p[:i], nil, 0, zk.WorldACL(zk.PermAll))
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("creating %s: %w", p[:i], err)
		}
	}
	return nil
}
