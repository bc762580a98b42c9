package zkserver

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Server is one ZooKeeper server of a Cluster.
type Server struct {
	c        *Cluster
	index    int
	id       int // myid, index+1
	addr     string
	external bool
	observer bool // a non-voting member (peerType=observer)

	dir                                  string
	clientPort, quorumPort, electionPort int
	tail                                 *logTail

	mu     sync.Mutex
	proc   *process       // the current or last process; nil before the first start
	shift  *time.Duration // the wall clock's shift set by SetClockShift; nil: Config.ClockShifts
	frozen bool           // Freeze stopped the process (SIGSTOP); Thaw, Stop and Kill resume it

	checkpoints int  // how many Checkpoint took, to name the next copy
	removed     bool // a reconfig removed it from the ensemble (reconfig.go)
}

type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process is reaped and its output drained
	err    error         // Wait's result, valid after exited is closed
}

func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// PeerPorts returns the ports the server binds for its peers: the quorum port
// (where followers reach it when it leads) and the election port.
func (s *Server) PeerPorts() (quorum, election int) { return s.quorumPort, s.electionPort }

// Addr returns the client address, "127.0.0.1:port".
func (s *Server) Addr() string { return s.addr }

// ID returns the server's myid (index+1).
func (s *Server) ID() int { return s.id }

// Dir returns the server's directory (zoo.cfg and data/); empty if external.
func (s *Server) Dir() string { return s.dir }

// PID returns the server process's id, or 0 when it is not running here.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.external || s.proc == nil || !s.proc.running() {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// Observer reports whether the server is an observer (Config.Observers):
// it serves clients and forwards their writes but does not vote.
func (s *Server) Observer() bool { return s.observer }

// External reports whether someone else runs the server.
func (s *Server) External() bool { return s.external }

// Running reports whether the server process is alive. External servers are
// always reported as running.
func (s *Server) Running() bool {
	if s.external {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && s.proc.running()
}

func (s *Server) exitErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return nil
	}
	select {
	case <-s.proc.exited:
		if s.proc.err == nil {
			return errors.New("exit status 0")
		}
		return s.proc.err
	default:
		return nil
	}
}

// Stop stops the server gracefully (SIGTERM, then SIGKILL after 10s) and waits
// for it to exit. The data directory is kept, so Restart resumes with the same
// data. Stopping a stopped server is a no-op; an external one, ErrExternal.
func (s *Server) Stop() error {
	if s.external {
		return ErrExternal
	}
	return s.stop(false)
}

// Kill kills the server with SIGKILL, modelling a crash, and waits for it to
// exit. The data directory is kept.
func (s *Server) Kill() error {
	if s.external {
		return ErrExternal
	}
	return s.kill()
}

func (s *Server) kill() error { return s.stop(true) }

func (s *Server) stop(hard bool) error {
	s.thawForStop()
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil || !p.running() {
		return nil
	}
	if !hard {
		_ = terminate(p.cmd.Process)
		select {
		case <-p.exited:
			return nil
		case <-time.After(10 * time.Second):
			s.c.log.Logf("zk%d: did not stop within 10s of SIGTERM; killing", s.id)
		}
	}
	if err := killProcess(p.cmd.Process); err != nil && p.running() {
		return fmt.Errorf("zktest: killing server %d: %w", s.id, err)
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("zktest: server %d (pid %d) did not exit after SIGKILL", s.id, p.cmd.Process.Pid)
	}
}

// Restart starts a stopped or killed server again on the same ports and data
// directory and waits (bounded by ctx and the start timeout) until it serves
// clients; an ensemble member serves once it has rejoined a quorum.
func (s *Server) Restart(ctx context.Context) error {
	if s.external {
		return ErrExternal
	}
	if s.Running() {
		return fmt.Errorf("zktest: server %d is running; Stop or Kill it first", s.id)
	}
	if err := s.launch(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.c.cfg.StartTimeout)
	defer cancel()
	return s.waitServing(ctx)
}

// waitServing polls srvr until the server reports a serving mode.
func (s *Server) waitServing(ctx context.Context) error {
	var last error
	for {
		if !s.Running() {
			return fmt.Errorf("zktest: server %d (%s) exited: %v%s", s.id, s.addr, s.exitErr(), s.tailString(40))
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		mode, err := s.c.serverMode(cctx, s.addr)
		cancel()
		switch {
		case err != nil:
			last = err
		case mode == "leader" || mode == "follower" || mode == "observer" || mode == "standalone":
			return nil
		default:
			last = fmt.Errorf("mode %q", mode)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("zktest: server %d (%s) not serving: %w (last check: %v)%s", s.id, s.addr, ctx.Err(), last, s.tailString(40))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// tailString renders the last n lines of the server's output.
func (s *Server) tailString(n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n--- last lines of server %d (%s, dir %s) ---\n", s.id, s.addr, s.dir)
	for _, l := range s.tail.last(n) {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}
