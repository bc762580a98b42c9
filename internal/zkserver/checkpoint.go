package zkserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
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
	s.mu.Lock()
	frozen := s.frozen
	s.mu.Unlock()
	if !frozen { // a server the test froze stays frozen
		if err := s.Freeze(); err == nil {
			defer s.Thaw()
		}
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
		return copySparse(path, to)
	})
}

// copySparse copies the file src to dst, leaving holes where src has them:
// ZooKeeper preallocates every transaction log (64 MB by default, 4 MB
// here) by writing its last byte, and a data directory that lived through
// many epochs holds many such logs, mostly hole. Where the system cannot
// tell holes (SEEK_DATA), every byte is copied.
func copySparse(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if err := copyData(out, in, st.Size()); err != nil {
		out.Close()
		return err
	}
	if err := out.Truncate(st.Size()); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

const (
	seekData = 3 // SEEK_DATA (Linux, the BSDs, macOS)
	seekHole = 4 // SEEK_HOLE
)

// copyData copies in's data regions to the same offsets of out.
func copyData(out, in *os.File, size int64) error {
	for off := int64(0); off < size; {
		start, err := in.Seek(off, seekData)
		if err != nil { // past the last data (ENXIO), or no SEEK_DATA here
			if off == 0 && !isNoData(err) {
				_, err = io.Copy(out, in)
				return err
			}
			return nil
		}
		end, err := in.Seek(start, seekHole)
		if err != nil {
			return err
		}
		if _, err := in.Seek(start, io.SeekStart); err != nil {
			return err
		}
		if _, err := out.Seek(start, io.SeekStart); err != nil {
			return err
		}
		if _, err := io.CopyN(out, in, end-start); err != nil {
			return err
		}
		off = end
	}
	return nil
}

// isNoData reports whether a SEEK_DATA failed because no data follows the
// offset (ENXIO), rather than for want of SEEK_DATA.
func isNoData(err error) bool { return errors.Is(err, syscall.ENXIO) }
