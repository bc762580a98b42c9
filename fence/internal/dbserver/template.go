package dbserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// Initialising a data directory (initdb, mariadb-install-db) takes about a
// second of CPU, most of a server's start; copying one takes a tenth of
// that. So each kind's first start on a machine initialises a template, in
// the temporary directory, and every server starts from a copy of it. A
// template's name digests what made it (the binaries, as found on disk,
// and the flags), so that an upgrade or a change of flags makes a new one;
// old ones stay until the temporary directory is cleaned.

// templateRoot is the directory of the current user's templates.
func templateRoot() string {
	return filepath.Join(os.TempDir(), "zklock-dbserver-templates."+strconv.Itoa(os.Geteuid()))
}

// initData fills the server's data directory, dir/data, with a copy of
// the template that init makes (init called first if there is none yet,
// with the directory to initialise), and returns its path. key names what
// init's result depends on: binaries (their size and time count too) and
// flags.
func (s *Server) initData(ctx context.Context, as *runAs, key []string, init func(ctx context.Context, data string) error) (string, error) {
	tmpl, err := template(ctx, s.Kind, as, key, init)
	if err != nil {
		return "", err
	}
	data := filepath.Join(s.dir, "data")
	// -p keeps the files' modes, and, as root, their owner (runAs's).
	if out, err := exec.CommandContext(ctx, "cp", "-Rp", tmpl, data).CombinedOutput(); err != nil {
		return "", fmt.Errorf("dbserver: copying template %s: %w: %s", tmpl, err, out)
	}
	return data, nil
}

// template returns the data directory of kind's template for key, made by
// init if there is none yet. A process that would make one while another
// does waits for the other's. A template is made in a directory of its
// own, renamed into place when complete: the directory of a maker that
// died unfinished is swept away (it stays locked while its maker lives).
func template(ctx context.Context, kind string, as *runAs, key []string, init func(context.Context, string) error) (string, error) {
	root := templateRoot()
	final := filepath.Join(root, kind+"-"+digest(key))
	data := filepath.Join(final, "data")
	if _, err := os.Stat(data); err == nil {
		return data, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("dbserver: %w", err)
	}
	// One maker at a time: the others wait (as long as its steps may
	// take), then copy its template.
	waitCtx, cancel := context.WithTimeout(ctx, 2*readyBound)
	defer cancel()
	lk, err := lockWait(waitCtx, final+".lock")
	if err != nil {
		return "", fmt.Errorf("dbserver: %w", err)
	}
	if lk != nil {
		defer lk.Close()
	}
	if _, err := os.Stat(data); err == nil {
		return data, nil
	}
	sweep(filepath.Join(root, "*"+buildInfix+"*")) // builders that died
	build, err := os.MkdirTemp(root, kind+buildInfix)
	if err != nil {
		return "", fmt.Errorf("dbserver: %w", err)
	}
	if mine, err := lockDir(build); err == nil && mine != nil {
		defer mine.Close()
	}
	if err := as.own(build); err != nil {
		os.RemoveAll(build)
		return "", err
	}
	if err := init(ctx, filepath.Join(build, "data")); err != nil {
		os.RemoveAll(build)
		return "", err
	}
	if err := os.Rename(build, final); err != nil {
		os.RemoveAll(build)
		if _, statErr := os.Stat(data); statErr != nil {
			return "", fmt.Errorf("dbserver: installing template %s: %w", final, err)
		}
	}
	return data, nil
}

// buildInfix names a template being made: KIND-build-RANDOM.
const buildInfix = "-build-"

// digest names key: its strings, and for each that names a file, the
// file's size and modification time.
func digest(key []string) string {
	h := sha256.New()
	for _, k := range key {
		fmt.Fprintf(h, "%s\x00", k)
		if fi, err := os.Stat(k); err == nil {
			fmt.Fprintf(h, "%d %d\x00", fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
