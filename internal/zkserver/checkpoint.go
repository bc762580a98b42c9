package zkserver

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Checkpoint is a copy of a server's data directory (its snapshots, its
// transaction logs and its epoch files) as they were at one moment.
type Checkpoint struct {
	server int    // the id of the server it was taken from
	dir    string // the copy
}

// Checkpoint copies the server's data directory. A running server is frozen
// for the copy (SIGSTOP) so that no write lands halfway through it: the copy
// is what a backup of the disk would hold. The copy lives in the server's
// directory and goes with the cluster.
func (s *Server) Checkpoint() (*Checkpoint, error) {
	if s.external {
		return nil, ErrExternal
	}
	if err := s.Freeze(); err == nil {
		defer s.Thaw()
	}
	s.mu.Lock()
	s.checkpoints++
	n := s.checkpoints
	s.mu.Unlock()
	dst := filepath.Join(s.dir, fmt.Sprintf("checkpoint-%d", n))
	if err := copyTree(s.dataDir(), dst); err != nil {
		return nil, fmt.Errorf("zktest: checkpoint of server %d: %w", s.id, err)
	}
	return &Checkpoint{server: s.id, dir: dst}, nil
}

// RestartFrom kills the server, puts its data directory back to cp, and
// starts it again (see Restart): a member restored from an older backup, or
// whose disk lost its latest writes.
func (s *Server) RestartFrom(ctx context.Context, cp *Checkpoint) error {
	if s.external {
		return ErrExternal
	}
	if cp == nil || cp.server != s.id {
		return fmt.Errorf("zktest: a checkpoint of another server given to server %d", s.id)
	}
	if err := s.kill(); err != nil {
		return err
	}
	if err := os.RemoveAll(s.dataDir()); err != nil {
		return fmt.Errorf("zktest: restoring server %d: %w", s.id, err)
	}
	if err := copyTree(cp.dir, s.dataDir()); err != nil {
		return fmt.Errorf("zktest: restoring server %d: %w", s.id, err)
	}
	return s.Restart(ctx)
}

// copyTree copies the regular files and directories under src to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
}
