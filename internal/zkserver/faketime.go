package zkserver

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// EnvLibfaketime names the environment variable that points the harness at
// libfaketime.so.1 when it is not where Debian's libfaketime package puts it.
const EnvLibfaketime = "ZKLOCK_LIBFAKETIME"

// faketimeHint tells a developer how to get libfaketime.
const faketimeHint = "make test installs it (scripts/install-interop.sh: Debian's faketime package), " +
	"or run `apt-get install faketime`, or set " + EnvLibfaketime + " to the path of libfaketime.so.1"

// findLibfaketime returns the path of libfaketime.so.1: $ZKLOCK_LIBFAKETIME,
// else where Debian's libfaketime package puts it (the multiarch directory,
// found with a glob rather than asking dpkg at every start), else a source
// build's /usr/local/lib.
func findLibfaketime() (string, error) {
	if p := os.Getenv(EnvLibfaketime); p != "" {
		if !isFile(p) {
			return "", fmt.Errorf("zktest: %s=%s is not a file", EnvLibfaketime, p)
		}
		return p, nil
	}
	for _, pat := range []string{"/usr/lib/*/faketime/libfaketime.so.1", "/usr/lib/faketime/libfaketime.so.1", "/usr/local/lib/faketime/libfaketime.so.1"} {
		if m, _ := filepath.Glob(pat); len(m) > 0 {
			return m[0], nil
		}
	}
	return "", fmt.Errorf("zktest: a server with a shifted clock needs libfaketime, which is not installed: %s", faketimeHint)
}

// faketimeEnv is what a JVM's environment gains so that its wall clock
// (System.currentTimeMillis, and so every transaction's time while it leads)
// reads shift off the real one. The monotonic clock, from which ZooKeeper
// measures its timeouts (ticks, session expiry, sync limits), is left alone,
// so the server behaves as one whose clock is simply set wrong.
// FAKETIME_FORCE_MONOTONIC_FIX=0 turns off the workaround libfaketime 0.9.10
// switches on for glibc 2.36: with it, every timed wait of Java 17
// (Thread.sleep, Object.wait) took three times as long here, and the
// servers missed their initLimit and never formed a quorum.
func faketimeEnv(lib string, shift time.Duration) []string {
	return []string{"LD_PRELOAD=" + lib, "FAKETIME=" + faketimeOffset(shift), "FAKETIME_DONT_FAKE_MONOTONIC=1", "FAKETIME_FORCE_MONOTONIC_FIX=0"}
}

// faketimeOffset is shift in libfaketime's relative form: a signed number
// of seconds ("+420", "-300", "+0.5").
func faketimeOffset(shift time.Duration) string {
	s := strconv.FormatFloat(shift.Seconds(), 'f', -1, 64)
	if shift >= 0 {
		s = "+" + s
	}
	return s
}

// shifted reports whether any server's clock is to be shifted.
func shifted(shifts []time.Duration) bool {
	for _, d := range shifts {
		if d != 0 {
			return true
		}
	}
	return false
}

// SetClockShift sets the shift of the server's wall clock from its next
// start (Restart): a server whose clock was set again while it was down.
// A running process keeps the clock it started with. A shift other than 0
// needs a cluster started with a shifted clock (Config.ClockShifts), where
// libfaketime was found.
func (s *Server) SetClockShift(shift time.Duration) error {
	if s.external {
		return ErrExternal
	}
	if shift != 0 && s.c.faketime == "" {
		return fmt.Errorf("zktest: server %d: a clock shift needs a cluster started with shifted clocks (ClockShifts)", s.id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shift = &shift
	return nil
}

// clockShift is the shift of server s's clock (0: the real clock).
func (s *Server) clockShift() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shift != nil {
		return *s.shift
	}
	if s.index < len(s.c.cfg.ClockShifts) {
		return s.c.cfg.ClockShifts[s.index]
	}
	return 0
}
