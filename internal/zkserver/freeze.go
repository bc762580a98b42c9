package zkserver

import (
	"errors"
	"fmt"
)

// ErrNotRunning is returned by Freeze and Thaw on a server that is not
// running here.
var ErrNotRunning = errors.New("zktest: server is not running")

// Freeze stops the server's process group (SIGSTOP) as a GC pause or a VM
// freeze would: its sockets stay open, nothing it holds is answered, and its
// clocks run on. Thaw resumes it; Stop and Kill thaw it first.
func (s *Server) Freeze() error { return s.signalFrozen(true) }

// Thaw resumes a frozen server (SIGCONT); a running one is left as it is.
func (s *Server) Thaw() error { return s.signalFrozen(false) }

func (s *Server) signalFrozen(freeze bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.external || s.proc == nil || !s.proc.running() {
		return ErrNotRunning
	}
	var err error
	if freeze {
		err = stopProcess(s.proc.cmd.Process)
	} else {
		err = continueProcess(s.proc.cmd.Process)
	}
	if err != nil {
		return fmt.Errorf("zktest: server %d: %w", s.id, err)
	}
	s.frozen = freeze
	return nil
}

// thawForStop resumes a frozen process so that it can act on SIGTERM.
func (s *Server) thawForStop() {
	s.mu.Lock()
	frozen := s.frozen && s.proc != nil
	s.mu.Unlock()
	if frozen {
		_ = s.Thaw()
	}
}
