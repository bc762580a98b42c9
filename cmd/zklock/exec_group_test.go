package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock/zktest"
)

// The command never outlives its lock (issue 57): each test runs a first
// holder whose command leaves a process in its group, a second holder
// waiting on the path whose command notes every process of the first run
// still alive when it starts, and fails if there is one.

// stubbornChild, in a command's script, starts a child in the command's
// process group that ignores SIGTERM, its pid appended to the file $0.
const stubbornChild = `sh -c 'trap "" TERM; echo $$ >> "$0"; exec sleep 1000' "$0" & `

// survivorsCheck is the next holder's command: for each pid listed in the
// file $0 whose process lives (a zombie does not), "alive PID" in the file
// $1, then "second".
const survivorsCheck = `for p in $(cat $0); do if [ -e /proc/$p ] && ! grep -q ') Z ' /proc/$p/stat; then echo alive $p >> $1; fi; done; echo second >> $1`

// runFiles makes the files of one test: pids (the first run's processes)
// and events (what happened, in order); what the pids file lists is killed
// at the end, whatever the test found.
func runFiles(t *testing.T) (pids, events string) {
	dir := t.TempDir()
	pids, events = filepath.Join(dir, "pids"), filepath.Join(dir, "events")
	t.Cleanup(func() {
		b, _ := os.ReadFile(pids)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	return pids, events
}

// requireNoSurvivor checks that the next holder found none of the first
// run's processes alive.
func requireNoSurvivor(t *testing.T, events, first string) {
	t.Helper()
	b, err := os.ReadFile(events)
	require.NoError(t, err)
	require.Equal(t, first+"second\n", string(b), "the next holder ran while a process of the first run lived")
}

// Case 1: the command dies of --max-hold's SIGTERM, leaving a child that
// ignores SIGTERM. The leftover is killed before the limit frees the lock,
// not --grace (10s) later.
func TestExecMaxHoldKillsLeftoversBeforeTheLimit(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	pids, events := runFiles(t)
	p := start(t, "exec", "--max-hold", "2s", "--grace", "10s", path, "--", "sh", "-c",
		stubbornChild+`echo started >> $1; while :; do sleep 0.05; done`, pids, events)
	waitQueue(t, c, path, 1)
	waitFile(t, events, "started")
	waitFile(t, pids, "\n")
	next := start(t, "exec", path, "--", "sh", "-c", survivorsCheck, pids, events)
	require.Equal(t, 0, next.wait(t, 20*time.Second), next.errText())
	require.Equal(t, exitHoldLimit, p.wait(t, 20*time.Second), p.errText())
	requireNoSurvivor(t, events, "started\n")
}

// Case 2: a --once-per run whose command exits 0 at once, leaving a child
// that ignores SIGTERM, is recorded as succeeded (the child killed before
// the limit), so that a --retry-failed start in the same period does not
// run it again.
func TestExecOncePerLeftoverRunSucceeds(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	pids, events := runFiles(t)
	// The leftover dies at the limit's SIGKILL (3.6s), and the end must be
	// recorded before the limit: 0.4s for two writes.
	job := []string{"exec", "--once-per", "1h", "--retry-failed", "--max-hold", "4s", "--grace", "10s", path, "--", "sh", "-c"}
	p := start(t, append(job, stubbornChild+`while [ ! -s $0 ]; do sleep 0.01; done; echo started >> $1`, pids, events)...)
	waitFile(t, pids, "\n")
	waitQueue(t, c, path, 1)
	next := start(t, "exec", path, "--", "sh", "-c", survivorsCheck, pids, events)
	require.Equal(t, 0, p.wait(t, 20*time.Second), "the command exited 0; stderr:\n%s", p.errText())
	require.Equal(t, 0, next.wait(t, 20*time.Second), next.errText())
	requireNoSurvivor(t, events, "started\n")
	st := jobState(t, path)
	require.Equal(t, "succeeded", st.Last.Outcome, "%+v", st.Last)

	code, _, stderr := runZK(t, 20*time.Second, append(job, `echo again >> $1`, pids, events)...)
	require.Equal(t, exitNotThisTime, code, "run twice in one period: %s", stderr)
}

// Case 8: a negative --max-hold is a usage error, as for zklock lock, not
// "no limit".
func TestExecNegativeMaxHoldRefused(t *testing.T) {
	t.Parallel()
	code, _, stderr := runZK(t, 20*time.Second, "exec", "--max-hold", "-1s", lockPath(t), "--", "true")
	require.Equal(t, exitUsage, code, stderr)
	require.Contains(t, stderr, "--max-hold must not be negative")
}

// Case 4: zklock is killed (kill -9) with a --grace longer than the
// session timeout: the reaper kills the group before the session can
// expire, not --grace after zklock's death. A 10 s session: the reaper has
// a second (a tenth of it) between its kill and the session's end; fresh-
// clone runs missed the 0.2 s of a 2 s session and the 0.5 s of a 5 s one.
func TestExecKilledReaperBeatsTheSession(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	pids, events := runFiles(t)
	p := start(t, "exec", "--session-timeout", "10s", "--grace", "30s", path, "--", "sh", "-c",
		`trap "" TERM; echo $$ >> $0; `+stubbornChild+`echo started >> $1; wait`, pids, events)
	waitQueue(t, c, path, 1)
	waitFile(t, events, "started")
	eventually(t, "two pids", func() bool { b, _ := os.ReadFile(pids); return len(strings.Fields(string(b))) == 2 })
	next := start(t, "exec", path, "--", "sh", "-c", survivorsCheck, pids, events)
	waitQueue(t, c, path, 2)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	require.Equal(t, 0, next.wait(t, 20*time.Second), next.errText())
	requireNoSurvivor(t, events, "started\n")
}

// Case 4b: the reaper is still starting (slow, as on a loaded machine)
// when --max-hold's SIGTERM goes to the group, and zklock is killed right
// after it: the reaper must not die of that SIGTERM, and kills the
// leftovers before the session can expire. (Sent to the whole group, the
// SIGTERM killed the reaper, and the leftover outlived the lock.)
func TestExecSlowReaperSurvivesTheGroupsSIGTERM(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	pids, events := runFiles(t)
	// --max-hold 5s: its SIGTERM at 2.5 s, while the reaper sleeps until 4 s;
	// the next run has those 2.5 s to queue (with 600 ms, a loaded machine's
	// race-built start of it came after the limit had freed the lock).
	p := startWith(t, []string{reaperDelayEnv + "=4s"}, "exec", "--session-timeout", "5s", "--max-hold", "5s",
		"--grace", "30s", path, "--", "sh", "-c", `trap "" TERM; echo $$ >> $0; `+stubbornChild+`echo started >> $1; wait`, pids, events)
	waitQueue(t, c, path, 1)
	waitFile(t, events, "started")
	eventually(t, "two pids", func() bool { b, _ := os.ReadFile(pids); return len(strings.Fields(string(b))) == 2 })
	next := start(t, "exec", path, "--", "sh", "-c", survivorsCheck, pids, events)
	waitQueue(t, c, path, 2)
	waitFile(t, p.stderr, "SIGTERM now")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	require.Equal(t, 0, next.wait(t, 20*time.Second), next.errText())
	requireNoSurvivor(t, events, "started\n")
}

// Case 4c: exec's own SIGKILL before --max-hold's limit comes late (a
// timer on a loaded machine; here 3 s late by a test-only variable), after
// the library's limit has ended the lease: the group is killed as the lease
// ends, before its node is deleted, so the next holder finds none of it.
// (With exec's timer alone, the next holder ran while the first run's
// processes lived.)
func TestExecHoldLimitKillsTheGroupBeforeTheNodeGoes(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	pids, events := runFiles(t)
	p := startWith(t, []string{holdKillLateEnv + "=3s"}, "exec", "--max-hold", "1s", "--grace", "30s", path, "--",
		"sh", "-c", `trap "" TERM; echo $$ >> $0; `+stubbornChild+`echo started >> $1; wait`, pids, events)
	waitQueue(t, c, path, 1)
	waitFile(t, events, "started")
	eventually(t, "two pids", func() bool { b, _ := os.ReadFile(pids); return len(strings.Fields(string(b))) == 2 })
	next := start(t, "exec", path, "--", "sh", "-c", survivorsCheck, pids, events)
	require.Equal(t, 0, next.wait(t, 20*time.Second), next.errText())
	requireNoSurvivor(t, events, "started\n")
	require.Equal(t, exitHoldLimit, p.wait(t, 20*time.Second), p.errText())
}

// Case 7: zklock's stderr is a pipe whose reader is gone: writing to it
// must not kill zklock (SIGPIPE) before the command's leftovers are
// stopped and the lock released.
func TestExecBrokenStderrStillStopsLeftovers(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	pids, events := runFiles(t)
	r, w, err := os.Pipe()
	require.NoError(t, err)
	r.Close() // the reader is gone
	cmd := exec.Command(bin, "exec", "--session-timeout", "2s", "--grace", "300ms", path, "--", "sh", "-c",
		`trap "" TERM; `+stubbornChild+`echo started >> $1; while [ ! -e $1.go ]; do sleep 0.05; done`, pids, events)
	cmd.Env = append(os.Environ(), envServers+"="+strings.Join(cluster.Addrs(), ","), "GORACE=atexit_sleep_ms=0")
	cmd.Stderr = w
	require.NoError(t, cmd.Start())
	w.Close()
	var werr error
	exited := make(chan struct{})
	go func() { werr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	waitQueue(t, c, path, 1)
	waitFile(t, events, "started")
	waitFile(t, pids, "\n")
	next := start(t, "exec", path, "--", "sh", "-c", survivorsCheck, pids, events)
	waitQueue(t, c, path, 2)
	require.NoError(t, os.WriteFile(events+".go", nil, 0o644)) // the command exits, the child stays
	require.Equal(t, 0, next.wait(t, 20*time.Second), next.errText())
	requireNoSurvivor(t, events, "started\n")
	select {
	case <-exited:
		require.NoError(t, werr, "zklock exits with the command's status")
	case <-time.After(10 * time.Second):
		t.Fatal("zklock still runs")
	}
}

// Case 3: with --and, the limit runs from the first path's grant: a path
// taken while exec waited for the next frees itself at its own limit, and
// the command is dead by then.
func TestExecSeveralPathsLimitFromTheFirstGrant(t *testing.T) {
	t.Parallel()
	paths := []string{lockPath(t), lockPath(t)}
	slices.Sort(paths) // taken in this order
	first, second := paths[0], paths[1]
	c := connect(t)
	m, err := c.NewMutex(second)
	require.NoError(t, err)
	held, err := m.Acquire(t.Context())
	require.NoError(t, err)
	pids, events := runFiles(t)
	// SIGTERM 1 s before the limit, not at half of it (as a grace longer
	// than the limit would have it): the command, started once the second
	// path is free, must have set its trap by then.
	p := start(t, "exec", "--max-hold", "5s", "--grace", "1s", first, "--and", second, "--", "sh", "-c",
		`trap "" TERM; echo $$ >> $0; echo started >> $1; while :; do sleep 0.05; done`, pids, events)
	waitQueue(t, c, first, 1)
	waitQueue(t, c, second, 2)
	next := start(t, "exec", first, "--", "sh", "-c", survivorsCheck, pids, events)
	waitQueue(t, c, first, 2)
	// The first path held alone for half its limit (what is tested); the
	// other half leaves a loaded machine room to grant the second path and
	// start the command before the limit.
	time.Sleep(2500 * time.Millisecond)
	require.NoError(t, held.Release(t.Context()))
	require.Equal(t, 0, next.wait(t, 20*time.Second), next.errText())
	require.Equal(t, exitHoldLimit, p.wait(t, 20*time.Second), p.errText())
	requireNoSurvivor(t, events, "started\n")
}

// zklock stopped (SIGSTOP, which it cannot refuse) while the command runs:
// the reaper, no longer told a later deadline, kills the group before the
// session can expire.
func TestExecStoppedHolderReaperKills(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	pids, events := runFiles(t)
	// A 10 s session, as in TestExecKilledReaperBeatsTheSession: the reaper
	// must be scheduled within a tenth of it.
	p := start(t, "exec", "--session-timeout", "10s", "--grace", "30s", path, "--", "sh", "-c",
		`trap "" TERM; echo $$ >> $0; echo started >> $1; while :; do sleep 0.05; done`, pids, events)
	waitQueue(t, c, path, 1)
	waitFile(t, events, "started")
	next := start(t, "exec", path, "--", "sh", "-c", survivorsCheck, pids, events)
	waitQueue(t, c, path, 2)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGSTOP))
	t.Cleanup(func() { _ = p.cmd.Process.Signal(syscall.SIGKILL) })
	require.Equal(t, 0, next.wait(t, 20*time.Second), next.errText())
	b, _ := os.ReadFile(events)
	require.Equal(t, "started\nsecond\n", string(b), "the next holder ran while a process of the first run lived; the stopped zklock's stderr (its reaper's too):\n%s", p.errText())
}

// While the lease holds, leftovers get the whole --grace after SIGTERM,
// even past the lease's current loss deadline, which moves on as the lease
// proves contact (the reaper follows it): here 2.5s of a 4s grace, with a
// session timeout of 2s.
func TestExecLeftoversGetTheGraceWhileTheLockHolds(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	pids, events := runFiles(t)
	code, _, stderr := runZK(t, 20*time.Second, "exec", "--session-timeout", "2s", "--grace", "4s", path, "--", "sh", "-c",
		`sh -c 'trap "echo term >> $1" TERM; echo $$ >> $0; i=0; while [ $i -lt 25 ]; do sleep 0.1; i=$((i+1)); done; echo done >> $1' "$0" "$1" & `+
			`while [ ! -s $0 ]; do sleep 0.01; done`, pids, events)
	require.Equal(t, 0, code, stderr)
	b, err := os.ReadFile(events)
	require.NoError(t, err)
	require.Equal(t, "term\ndone\n", string(b), "the leftover was killed before --grace; stderr:\n%s", stderr)
}

// A loss is a deadline for the group too: cut off from ZooKeeper, zklock
// presumes the lock lost before the session can expire, and the command,
// which ignores SIGTERM, is killed before the next holder can run, whatever
// --grace says (30s here, with a 2s session timeout).
func TestExecCutOffKillsBeforeTheSessionExpires(t *testing.T) {
	t.Parallel()
	h := stubbornBehindAProxy(t)
	h.proxy.Stall()
	h.requireKilledBeforeTheNext(t)
}

// A false loss: zklock's connection stalls past its lease's deadline and
// flows again before the session can expire. The session lives on, and so
// would the node, were the library to delete it at the loss: the next
// holder would run beside a command that ignores SIGTERM, which zklock
// kills only at 0.9 T. The node stays until T after the leader's word.
func TestExecFalseLossKillsBeforeTheNextHolder(t *testing.T) {
	t.Parallel()
	h := stubbornBehindAProxy(t)
	h.proxy.Stall()
	eventuallyWithin(t, 10*time.Second, "zklock's loss", func() bool {
		return strings.Contains(h.first.errText(), "lost the lock on "+h.path+" while the command ran")
	})
	h.proxy.Resume() // at 0.8 T: the session lives on
	h.requireKilledBeforeTheNext(t)
}

// stubbornHolder is a zklock exec holding path through proxy (session 2s,
// --grace 30s) for a command that ignores SIGTERM, and a second exec
// waiting behind it, which checks for survivors of the first when it runs.
type stubbornHolder struct {
	path        string
	proxy       *zktest.Proxy
	first, next *proc
	events      string
}

func stubbornBehindAProxy(t *testing.T) stubbornHolder {
	path := lockPath(t)
	c := connect(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	pids, events := runFiles(t)
	first := start(t, "exec", "--servers", proxy.Addr(), "--session-timeout", "2s", "--grace", "30s", path, "--", "sh", "-c",
		`trap "" TERM; echo $$ >> $0; echo started >> $1; while :; do sleep 0.05; done`, pids, events)
	waitQueue(t, c, path, 1)
	waitFile(t, events, "started")
	next := start(t, "exec", path, "--", "sh", "-c", survivorsCheck, pids, events)
	waitQueue(t, c, path, 2)
	return stubbornHolder{path: path, proxy: proxy, first: first, next: next, events: events}
}

// requireKilledBeforeTheNext: the next holder ran, found no process of the
// first alive, and the first exec exited as lost.
func (h stubbornHolder) requireKilledBeforeTheNext(t *testing.T) {
	t.Helper()
	require.Equal(t, 0, h.next.wait(t, 20*time.Second), h.next.errText())
	requireNoSurvivor(t, h.events, "started\n")
	require.Equal(t, exitLost, h.first.wait(t, 20*time.Second), h.first.errText())
}

// A closed stderr while zklock waits: its timeout message fails to write
// instead of killing zklock, which exits 75 as it says. The torture's exec
// runners saw zklock die of SIGPIPE before its command started (exit 141)
// 12 times in ten minutes.
func TestExecBrokenStderrWhileWaitingExitsAsUsual(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	m, err := c.NewMutex(path)
	require.NoError(t, err)
	held, err := m.Acquire(t.Context())
	require.NoError(t, err)
	defer held.Release(context.Background())
	r, w, err := os.Pipe()
	require.NoError(t, err)
	r.Close() // the reader is gone
	cmd := exec.Command(bin, "exec", "--timeout", "500ms", path, "--", "true")
	cmd.Env = append(os.Environ(), envServers+"="+strings.Join(cluster.Addrs(), ","), "GORACE=atexit_sleep_ms=0")
	cmd.Stderr = w
	require.NoError(t, cmd.Start())
	w.Close()
	err = cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, exitTimeout, ee.ExitCode(), "%v", ee.ProcessState)
}
