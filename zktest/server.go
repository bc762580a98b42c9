package zktest

import (
	"context"
	"time"

	"github.com/zklock/zklock/internal/zkserver"
)

// Server is one ZooKeeper server of a Cluster.
type Server struct {
	s *zkserver.Server
	c *Cluster
}

// Addr returns the client address, "127.0.0.1:port".
func (s *Server) Addr() string { return s.s.Addr() }

// ID returns the server's myid (index+1).
func (s *Server) ID() int { return s.s.ID() }

// Dir returns the server's directory (zoo.cfg and data/); empty if external.
func (s *Server) Dir() string { return s.s.Dir() }

// PID returns the server process's id (to measure its CPU, say), or 0 when
// the server is external or not running.
func (s *Server) PID() int { return s.s.PID() }

// Observer reports whether the server is an observer (WithObservers).
func (s *Server) Observer() bool { return s.s.Observer() }

// Running reports whether the server process is alive. External servers are
// always reported as running.
func (s *Server) Running() bool { return s.s.Running() }

// externalFault handles a lifecycle call on an external server: skip the test if
// we have one (fault tests cannot run against servers we don't own), else
// report ErrExternal.
func (s *Server) externalFault(op string) error {
	if s.c.tb != nil {
		s.c.tb.Helper()
		s.c.tb.Skipf("zktest: Server.%s needs a locally started ZooKeeper; %s is set", op, EnvServers)
	}
	return ErrExternal
}

// Stop stops the server gracefully (SIGTERM, then SIGKILL after 10s) and waits
// for it to exit. The data directory is kept, so Restart resumes with the same
// data. Stopping a stopped server is a no-op.
//
// On an external server (ZKLOCK_TEST_SERVERS) Stop, Kill and Restart skip the
// test that called Start (call them from that test's goroutine), or return
// ErrExternal for a cluster from StartMain.
func (s *Server) Stop() error {
	if s.s.External() {
		return s.externalFault("Stop")
	}
	return s.s.Stop()
}

// Kill kills the server with SIGKILL, modelling a crash, and waits for it to
// exit. The data directory is kept.
func (s *Server) Kill() error {
	if s.s.External() {
		return s.externalFault("Kill")
	}
	return s.s.Kill()
}

// Restart starts a stopped or killed server again on the same ports and data
// directory and waits (bounded by ctx and the start timeout) until it serves
// clients; an ensemble member serves once it has rejoined a quorum.
func (s *Server) Restart(ctx context.Context) error {
	if s.s.External() {
		return s.externalFault("Restart")
	}
	return s.s.Restart(ctx)
}

// SetClockShift sets the shift of the server's wall clock (WithClockShifts)
// from its next Restart, as when its clock is set again while it is down:
// Kill, SetClockShift, Restart moves ZooKeeper's time to wherever a test
// needs it. A shift other than 0 needs a cluster started WithClockShifts with
// one that is not 0 (so that libfaketime was found).
func (s *Server) SetClockShift(shift time.Duration) error {
	if s.s.External() {
		return s.externalFault("SetClockShift")
	}
	return s.s.SetClockShift(shift)
}

// Freeze stops the server process (SIGSTOP), as a long GC pause or a frozen
// VM would: its connections stay open and unanswered, its peers hear nothing
// from it, and its clocks run on, so a frozen leader expires overdue
// sessions the moment it is thawed. Thaw resumes it; Stop and Kill resume a
// frozen server first. ErrNotRunning if it is not running here.
func (s *Server) Freeze() error {
	if s.s.External() {
		return s.externalFault("Freeze")
	}
	return s.s.Freeze()
}

// Thaw resumes a server stopped by Freeze (SIGCONT).
func (s *Server) Thaw() error {
	if s.s.External() {
		return s.externalFault("Thaw")
	}
	return s.s.Thaw()
}

// Pause freezes the server for d, then thaws it; it returns early, thawed,
// if ctx ends first.
func (s *Server) Pause(ctx context.Context, d time.Duration) error {
	if err := s.Freeze(); err != nil {
		return err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return s.Thaw()
}
