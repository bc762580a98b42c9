//go:build linux

package zklock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// The pause case for real: TestTorture runs this test binary again as a
// child process (TestTortureChild) that takes the torture's locks through a
// proxy of its own and reports on stdout what it does; the parent stops it
// with SIGSTOP and resumes it with SIGCONT. Both processes stamp events with
// CLOCK_MONOTONIC, so the parent can tell whether the child acted after
// someone else was granted the lock.

const (
	envChild      = "ZKLOCK_TORTURE_CHILD" // "1": TestTortureChild acts instead of skipping
	envChildAddr  = "ZKLOCK_TORTURE_ADDR"  // the child's proxy
	envChildPaths = "ZKLOCK_TORTURE_PATHS" // comma-separated lock paths
	envChildRoot  = "ZKLOCK_TORTURE_ROOT"  // the cleanup root
	envChildSeed  = "ZKLOCK_TORTURE_SEED"
	childTag      = "torture-child" // first field of every report line
	childStream   = 1 << 20         // the child's PCG stream, apart from the workers'
	childWriteGap = 10 * time.Millisecond
)

// monoNow reads CLOCK_MONOTONIC, the clock the test shares with its child
// (Go's own monotonic readings count from process start, so they differ).
func monoNow() mono {
	var ts syscall.Timespec
	const clockMonotonic = 1
	_, _, errno := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0)
	if errno != 0 {
		panic(fmt.Sprintf("clock_gettime: %v", errno))
	}
	return mono(ts.Nano())
}

// TestTortureChild is the child process of TestTorture; run alone it skips.
// It loops: acquire one of the paths, hold it a while checking Err() every
// few milliseconds and reporting each successful check as a "write", then
// release. It stops when the parent closes its stdin.
func TestTortureChild(t *testing.T) {
	if os.Getenv(envChild) != "1" {
		t.Skip("runs only as TestTorture's child process")
	}
	seed, err := strconv.ParseUint(os.Getenv(envChildSeed), 10, 64)
	if err != nil {
		t.Fatalf("child: seed: %v", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	c, err := zklock.Connect(cctx, []string{os.Getenv(envChildAddr)}, tortureOptions(os.Getenv(envChildRoot), tortureSession, nil)...)
	cancel()
	if err != nil {
		t.Fatalf("child: connect: %v", err)
	}
	defer c.Close()
	ch := &childLocker{c: c, paths: strings.Split(os.Getenv(envChildPaths), ","), rng: rand.New(rand.NewPCG(seed, childStream))}
	for ctx.Err() == nil {
		ch.round(ctx)
	}
}

type childLocker struct {
	c     *zklock.Client
	paths []string
	rng   *rand.Rand
}

// say reports one event to the parent: one write per line, so lines never mix.
func (ch *childLocker) say(format string, args ...any) {
	fmt.Fprintf(os.Stdout, childTag+" "+format+"\n", args...)
}

func (ch *childLocker) round(ctx context.Context) {
	path := ch.paths[ch.rng.IntN(len(ch.paths))]
	m, err := ch.c.NewMutex(path)
	if err != nil {
		panic(err)
	}
	actx, cancel := context.WithTimeout(ctx, randDur(ch.rng, time.Second, 6*time.Second))
	called := monoNow()
	l, err := m.Acquire(actx)
	granted := monoNow()
	cancel()
	hold := randDur(ch.rng, 50*time.Millisecond, 3*time.Second)
	if err != nil {
		sleepCtx(ctx, 20*time.Millisecond)
		return
	}
	tok := tokenOf(l)
	ch.say("grant %s %s %d %d %d %d", path, l.Node(), tok, called, granted, granted+mono(hold))
	end, why := ch.hold(ctx, l, path, tok, hold)
	ch.say("end %s %d %s", l.Node(), end, why)
}

// hold keeps the lease for d, checking Err() every few milliseconds and
// reporting every check that passed; it returns when and why the lease ended.
func (ch *childLocker) hold(ctx context.Context, l *zklock.Lease, path string, tok int64, d time.Duration) (mono, string) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	tick := time.NewTicker(childWriteGap)
	defer tick.Stop()
	for {
		select {
		case <-l.Done():
			at := monoNow()
			_ = l.Release(context.Background()) // a lost lease: removes what is left in the background
			return at, endReason(l.Err())
		case <-tick.C:
			t0 := monoNow()
			if l.Err() == nil && tok != 0 {
				ch.say("write %s %d %d %d", path, tok, t0, monoNow())
			}
			continue
		case <-timer.C:
		case <-ctx.Done():
		}
		at := monoNow()
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := l.Release(rctx)
		cancel()
		if err == nil {
			return at, "released"
		}
		return at, endReason(err)
	}
}

// endReason is "lost" or "other", then the error quoted (no spaces in field 1).
func endReason(err error) string {
	kind := "other"
	if errors.Is(err, zklock.ErrLockLost) {
		kind = "lost"
	}
	return kind + " " + strconv.Quote(fmt.Sprint(err))
}

// childProc is the parent's handle on the child process.
type childProc struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	proxy   *zktest.Proxy
	readers sync.WaitGroup
	busy    atomic.Bool // a pause is under way
	exited  chan struct{}
	waitErr error
}

// startChild starts the child on its own proxy. Its TestMain is pointed at
// the proxy as an external server, so it starts no ZooKeeper of its own.
func (tt *torture) startChild() *childProc {
	t := tt.t
	cp := &childProc{proxy: zktest.NewProxy(t, tt.cluster.Addrs()...), exited: make(chan struct{})}
	cp.cmd = exec.Command(os.Args[0], "-test.run=^TestTortureChild$", "-test.count=1", "-test.timeout=0")
	cp.cmd.Env = append(os.Environ(), envChild+"=1", envChildAddr+"="+cp.proxy.Addr(),
		envChildPaths+"="+strings.Join(tt.cfg.paths, ","), envChildRoot+"="+tt.cfg.root,
		envChildSeed+"="+strconv.FormatUint(tt.cfg.seed, 10), zktest.EnvServers+"="+cp.proxy.Addr())
	cp.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var err error
	if cp.stdin, err = cp.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cp.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cp.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.cmd.Start(); err != nil {
		t.Fatalf("starting the child: %v", err)
	}
	cp.readers.Add(2)
	go cp.read(stdout, tt.childLine)
	go cp.read(stderr, func(line string) { t.Logf("child stderr: %s", line) })
	go func() {
		cp.readers.Wait() // Wait closes the pipes: read them to the end first
		cp.waitErr = cp.cmd.Wait()
		close(cp.exited)
	}()
	t.Cleanup(func() { // if the test ended early; its readers log through t
		_ = cp.cmd.Process.Kill()
		<-cp.exited
	})
	return cp
}

func (cp *childProc) read(r io.Reader, line func(string)) {
	defer cp.readers.Done()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line(sc.Text())
	}
}

// pause stops the whole child process for d, preferably while it holds a
// lock (it waits up to a few seconds for that).
func (cp *childProc) pause(lg *ledger, d time.Duration, began func()) {
	for wait := time.Now().Add(3 * time.Second); !lg.childHolds() && time.Now().Before(wait); {
		time.Sleep(5 * time.Millisecond)
	}
	began()
	pid := cp.cmd.Process.Pid
	stop := monoNow()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return // it has exited; stop reports that
	}
	time.Sleep(d)
	_ = syscall.Kill(pid, syscall.SIGCONT)
	lg.paused(pauseSpan{stop: stop, cont: monoNow()})
}

// stop asks the child to finish (it releases and closes its client) and
// waits for it; it reports whether the child exited cleanly.
func (cp *childProc) stop(t *testing.T) bool {
	_ = syscall.Kill(cp.cmd.Process.Pid, syscall.SIGCONT)
	cp.stdin.Close()
	select {
	case <-cp.exited:
	case <-time.After(30 * time.Second):
		t.Errorf("harness: the child did not exit within 30s of being told to stop; killing it")
		_ = cp.cmd.Process.Kill()
		<-cp.exited
		return false
	}
	if cp.waitErr != nil {
		t.Errorf("harness: the child failed: %v (its output is logged above)", cp.waitErr)
		return false
	}
	return true
}

// childLine takes one line of the child's stdout into the ledger.
func (tt *torture) childLine(line string) {
	f := strings.Fields(line)
	fields := map[string]int{"grant": 8, "write": 6, "end": 5}
	if len(f) < 2 || f[0] != childTag || len(f) < fields[f[1]] {
		tt.t.Logf("child: %s", line)
		return
	}
	num := func(i int) int64 {
		if i >= len(f) {
			return 0
		}
		n, _ := strconv.ParseInt(f[i], 10, 64)
		return n
	}
	switch f[1] {
	case "grant":
		tt.counts.add("grant.child")
		tt.lg.childGrant(&leaseRec{path: f[2], node: f[3], token: num(4), called: mono(num(5)), start: mono(num(6)), planned: mono(num(7)), holder: "child", child: true})
	case "write":
		tt.counts.add("child.writes")
		tt.lg.childWrote(childWrite{path: f[2], token: num(3), t0: mono(num(4)), t1: mono(num(5)), arrived: monoNow()})
	case "end":
		why := errors.New(strings.Join(f[4:], " "))
		if len(f) > 4 && f[4] == "lost" {
			why = fmt.Errorf("%w: %s", zklock.ErrLockLost, strings.Join(f[5:], " "))
		}
		tt.lg.childEnd(f[2], mono(num(3)), why)
	default:
		tt.t.Logf("child: %s", line)
	}
}
