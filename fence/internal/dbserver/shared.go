package dbserver

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// dirPrefix names, in the temporary directory, the servers' directories
// (zklock-dbserver-KIND-*), and lockFile the file in each that its test
// binary keeps locked.
const (
	dirPrefix = "zklock-dbserver-"
	lockFile  = "lock"
)

// sweepOnce sweeps the leftover directories once a process, before its
// first server.
var sweepOnce sync.Once

// shared holds the process's shared servers, by kind.
var shared struct {
	sync.Mutex
	m map[string]*sharedServer
}

type sharedServer struct {
	once sync.Once
	s    *Server
	err  error
}

// Shared returns the process's server of the given kind (Postgres or
// MariaDB), starting it on the first call; later calls return the same
// server, or the first call's error. The tests that share it must keep
// apart within it (their own tables, or databases). StopShared stops it,
// from TestMain:
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		dbserver.StopShared()
//		os.Exit(code)
//	}
func Shared(kind string) (*Server, error) {
	if kind != Postgres && kind != MariaDB {
		return nil, fmt.Errorf("dbserver: unknown kind %q (want %q or %q)", kind, Postgres, MariaDB)
	}
	shared.Lock()
	if shared.m == nil {
		shared.m = make(map[string]*sharedServer)
	}
	e := shared.m[kind]
	if e == nil {
		e = new(sharedServer)
		shared.m[kind] = e
	}
	shared.Unlock()
	e.once.Do(func() { e.s, e.err = Start(context.Background(), kind) })
	return e.s, e.err
}

// StopShared stops the servers Shared started (waiting for one still
// starting); a later Shared starts a new one.
func StopShared() error {
	shared.Lock()
	m := shared.m
	shared.m = nil
	shared.Unlock()
	var errs []error
	for _, e := range m {
		e.once.Do(func() {}) // waits for a start under way
		if e.s != nil {
			errs = append(errs, e.s.Stop())
		}
	}
	return errors.Join(errs...)
}
