package interop

import (
	"bufio"
	"context"

	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
)

// This file runs the peers: Curator (a Java driver compiled once per run),
// kazoo (a Python driver, run by Debian's python3, where python3-kazoo puts
// kazoo), zklock and go-zookeeper's zk.Lock in this process. Every peer
// stamps its critical sections on CLOCK_MONOTONIC, which all processes on
// the machine share.

// curatorJars are the Debian packages' jars (libcurator-recipes-java and
// what it depends on).
var curatorJars = []string{
	"curator-recipes", "curator-framework", "curator-client", "zookeeper", "zookeeper-jute",
	"guava", "slf4j-api", "netty-handler", "netty-transport", "netty-common", "netty-buffer",
	"netty-resolver", "netty-codec", "netty-transport-native-unix-common", "netty-transport-classes-epoll",
}

const python = "/usr/bin/python3"

// peerSetup is what TestMain found: the compiled driver's classpath, or why
// the peers are missing.
var peerSetup struct {
	classpath string
	missing   error
}

const installHint = "run scripts/install-interop.sh (make interop) to install Curator, a JDK and kazoo"

// preparePeers compiles Driver.java into dir, and checks that kazoo imports.
func preparePeers(dir string) error {
	var cp []string
	for _, j := range curatorJars {
		p := "/usr/share/java/" + j + ".jar"
		if _, err := os.Stat(p); err == nil {
			cp = append(cp, p)
		} else if strings.HasPrefix(j, "curator") {
			return fmt.Errorf("%s missing: %s", p, installHint)
		}
	}
	javac := "javac"
	if home := os.Getenv("JAVA_HOME"); home != "" {
		javac = filepath.Join(home, "bin", "javac")
	}
	src, err := filepath.Abs("testdata/Driver.java")
	if err != nil {
		return err
	}
	out, err := exec.Command(javac, "-nowarn", "-cp", strings.Join(cp, ":"), "-d", dir, src).CombinedOutput()
	if err != nil {
		return fmt.Errorf("compiling the Curator driver: %v: %s (%s)", err, out, installHint)
	}
	peerSetup.classpath = strings.Join(append(cp, dir), ":")
	if out, err := exec.Command(python, "-c", "import kazoo.recipe.lock").CombinedOutput(); err != nil {
		return fmt.Errorf("kazoo is not importable by %s: %v: %s (%s)", python, err, out, installHint)
	}
	return nil
}

func requirePeers(t *testing.T) {
	t.Helper()
	if peerSetup.missing != nil {
		t.Fatalf("interop peers missing: %v", peerSetup.missing)
	}
}

// mono is a CLOCK_MONOTONIC reading in nanoseconds.
type mono int64

func monoNow() mono {
	var ts syscall.Timespec
	const clockMonotonic = 1
	_, _, errno := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0)
	if errno != 0 {
		panic(fmt.Sprintf("clock_gettime: %v", errno))
	}
	return mono(ts.Nano())
}

// hold is one critical section of one peer.
type hold struct {
	who      string
	shared   bool // a reader's (may overlap other readers)
	acq, rel mono
}

// record collects every peer's critical sections.
type record struct {
	mu    sync.Mutex
	holds []hold
}

func (r *record) add(h hold) {
	r.mu.Lock()
	r.holds = append(r.holds, h)
	r.mu.Unlock()
}

func (r *record) all() []hold {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hold(nil), r.holds...)
}

// proc is a peer in another process.
type proc struct {
	name     string
	cmd      *exec.Cmd
	ready    chan struct{}
	acquired chan struct{} // closed at the first ACQ
	out      chan string   // the driver's "OUT ..." lines, without the prefix
	done     chan error
}

// startJava runs the Curator driver.
func startJava(t *testing.T, rec *record, name, path, kind string, cycles int, holdMs int) *proc {
	return startProc(t, rec, name, kind == "read", "java", "-cp", peerSetup.classpath, "Driver",
		strings.Join(servers, ","), path, kind, strconv.Itoa(cycles), strconv.Itoa(holdMs))
}

// startKazoo runs the kazoo driver.
func startKazoo(t *testing.T, rec *record, name, path, kind string, cycles int, holdMs int, extra ...string) *proc {
	args := append([]string{"testdata/driver.py", strings.Join(servers, ","), path, kind, strconv.Itoa(cycles), strconv.Itoa(holdMs)}, extra...)
	return startProc(t, rec, name, kind == "read", python, args...)
}

func startProc(t *testing.T, rec *record, name string, shared bool, bin string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start(), "%s", name)
	p := &proc{name: name, cmd: cmd, ready: make(chan struct{}), acquired: make(chan struct{}), out: make(chan string, 64), done: make(chan error, 1)}
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-p.done })
	go func() {
		err := p.read(stdout, rec, shared)
		if werr := cmd.Wait(); err == nil && werr != nil {
			err = fmt.Errorf("%s: %v: %s", name, werr, lastLines(stderr.String(), 15))
		}
		p.done <- err
		close(p.done)
	}()
	return p
}

// read parses the driver's output into holds.
func (p *proc) read(r io.Reader, rec *record, shared bool) error {
	sc := bufio.NewScanner(r)
	var acq mono
	var readyOnce, acqOnce sync.Once
	defer readyOnce.Do(func() { close(p.ready) })
	defer acqOnce.Do(func() { close(p.acquired) })
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "OUT "); ok {
			p.out <- line
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) == 1 && f[0] == "READY" {
			readyOnce.Do(func() { close(p.ready) })
			continue
		}
		if len(f) != 2 {
			continue // a library's log line
		}
		ns, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "ACQ":
			acq = mono(ns)
			acqOnce.Do(func() { close(p.acquired) })
		case "REL":
			rec.add(hold{who: p.name, shared: shared, acq: acq, rel: mono(ns)})
		}
	}
	return sc.Err()
}

func (p *proc) wait(t *testing.T) {
	t.Helper()
	select {
	case err := <-p.done:
		require.NoError(t, err, "%s", p.name)
	case <-time.After(90 * time.Second):
		t.Fatalf("%s did not finish", p.name)
	}
}

func (p *proc) waitReady(t *testing.T) {
	t.Helper()
	select {
	case <-p.ready:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s never connected", p.name)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// goPeer runs acquire/release cycles in this process.
type goPeer struct {
	name string
	done chan error
}

// runGo cycles take (which acquires and returns the release) and stamps
// each hold.
func runGo(rec *record, name string, shared bool, cycles int, holdFor time.Duration, take func() (func() error, error)) *goPeer {
	g := &goPeer{name: name, done: make(chan error, 1)}
	go func() {
		for range cycles {
			release, err := take()
			if err != nil {
				g.done <- fmt.Errorf("%s: %w", name, err)
				return
			}
			h := hold{who: name, shared: shared, acq: monoNow()}
			time.Sleep(holdFor)
			h.rel = monoNow()
			rec.add(h)
			if err := release(); err != nil {
				g.done <- fmt.Errorf("%s: release: %w", name, err)
				return
			}
		}
		g.done <- nil
	}()
	return g
}

func (g *goPeer) wait(t *testing.T) {
	t.Helper()
	select {
	case err := <-g.done:
		require.NoError(t, err)
	case <-time.After(90 * time.Second):
		t.Fatalf("%s did not finish", g.name)
	}
}

// zklockClient connects a zklock client for the test.
func zklockClient(t *testing.T) *zklock.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := zklock.Connect(ctx, servers, zklock.WithSessionTimeout(10*time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// leaseTaker adapts an Acquire method.
func leaseTaker(acquire func(context.Context) (*zklock.Lease, error)) func() (func() error, error) {
	return func() (func() error, error) {
		l, err := acquire(context.Background())
		if err != nil {
			return nil, err
		}
		return func() error { return l.Release(context.Background()) }, nil
	}
}

// zkLockTaker is go-zookeeper's zk.Lock on path, on a session of its own.
func zkLockTaker(t *testing.T, path string) func() (func() error, error) {
	t.Helper()
	conn, events, err := zk.Connect(servers, 10*time.Second, zk.WithLogger(log.New(io.Discard, "", 0)))
	require.NoError(t, err)
	t.Cleanup(conn.Close)
	for ev := range events {
		if ev.State == zk.StateHasSession {
			break
		}
	}
	go func() {
		for range events {
		}
	}()
	l := zk.NewLock(conn, path, zk.WorldACL(zk.PermAll))
	return func() (func() error, error) {
		if err := l.Lock(); err != nil {
			return nil, err
		}
		return l.Unlock, nil
	}
}

// exclusionViolations lists every pair of holds that overlap where at least
// one is not shared.
func exclusionViolations(holds []hold) []string {
	var out []string
	for i, a := range holds {
		for _, b := range holds[i+1:] {
			if (!a.shared || !b.shared) && a.acq < b.rel && b.acq < a.rel {
				out = append(out, fmt.Sprintf("%s [%d,%d] overlaps %s [%d,%d]", a.who, a.acq, a.rel, b.who, b.acq, b.rel))
			}
		}
	}
	return out
}

// mostAtOnce is the largest number of holds that overlap at one moment.
func mostAtOnce(holds []hold) int {
	most := 0
	for _, a := range holds {
		n := 0
		for _, b := range holds {
			if b.acq <= a.acq && a.acq < b.rel {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}
