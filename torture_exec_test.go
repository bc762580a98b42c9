//go:build linux

package zklock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/zklock/zklock/zktest"
)

// The swarm's "exec" dimension (issue 57): `zklock exec` runs beside the
// library clients, as an operator's cron line or script would, on the
// torture's mutex paths. Its promise (docs/cli.md, "The command never
// outlives its lock") is that no process of a run lives once anyone else may
// hold the lock, whatever happens to zklock itself. A few runners each run
// `zklock exec` again and again, every run through the runner's own proxy,
// with a short session timeout (2 s), a small --grace and often a --max-hold;
// the command is a shell script that
//
//   - first looks, in /proc, for every process of the earlier exec runs of its
//     path that the test has not yet seen dead, and prints what it finds
//     ("seen": a process alive then is a survivor, a violation unless the
//     earlier run's node was deleted by hand first);
//   - prints "start" with its pid (the group's id), ZKLOCK_NODE and
//     ZKLOCK_TOKEN, and sometimes starts a grandchild that ignores SIGTERM and
//     sleeps on ("child" with its pid);
//   - sleeps its hold time and prints "end".
//
// The runner stamps each line as it reads it and polls the run's processes in
// /proc every execPoll. A run is a holder of its path in the ledger from the
// "start" line to the last moment one of its processes was seen alive, so the
// overlap check says when a library lease (or another exec run) was granted
// while a process of an earlier run lived, and when a run's command started
// while a library lease held. Faults, drawn by the schedule and carried out
// by a runner in its next run: zklock killed (SIGKILL) mid-hold, sent SIGTSTP
// (it must refuse: a stopped zklock is a violation), its stderr a pipe whose
// reader is gone with the command past --max-hold (zklock must not die of
// SIGPIPE), a grandchild that ignores SIGTERM, and the runner's proxy stalled
// mid-hold. Every process of a run must be dead within execSurvival of
// zklock's exit.

const (
	execRunners = 3
	execStream  = 1 << 23 // the runners' PCG streams
	execSession = tortureSession
	execPoll    = 20 * time.Millisecond
	// execSurvival: how long a process of a run may outlive zklock. Killed,
	// zklock leaves its reaper, which kills the group before the session
	// can expire; otherwise the group is empty before zklock releases.
	execSurvival = execSession + overshootSlack
)

// execScript is the command: $0 the registry of the path's earlier runs'
// processes ("pid starttime run" lines), $1 1 for a grandchild that ignores
// SIGTERM, $2 the hold in seconds.
const execScript = `while read p s r; do if read st < /proc/$p/stat; then echo "seen $r $p $s $st"; fi; done < "$0" 2>/dev/null
echo "start $$ $ZKLOCK_NODE $ZKLOCK_TOKEN"
if [ "$1" = 1 ]; then sh -c 'trap "" TERM; echo "child $$"; exec sleep 1000' & fi
sleep "$2"
echo end`

type execRun struct {
	tt      *torture
	bin     string
	dir     string
	runners []*execRunner
	seq     atomic.Int64

	mu        sync.Mutex
	live      []map[string][]execProc // by path index: each run's processes not yet seen dead, by run name
	survivors []execSurvivor
	runs      map[string]*execRec // every run that started its command, by name
}

type execRunner struct {
	idx   int
	proxy *zktest.Proxy
	armed atomic.Uint32 // faults for its next run, a bit per kind (1 << (kind - fExecKill))
	busy  atomic.Bool   // an exec_stall is under way
}

// execProc is a process of a run: its pid and its start time in clock
// ticks since boot (/proc/pid/stat's field 22), so that a reused pid is not
// taken for it.
type execProc struct {
	pid   int
	start uint64
}

type execRec struct {
	name string
	rec  *leaseRec
}

// execSurvivor: a later run's command found a process of an earlier run
// alive as it started.
type execSurvivor struct {
	earlier, later string
	pid            int
	state          string
	at             mono
}

func (tt *torture) startExec() {
	if !tt.cfg.sw.exec {
		return
	}
	x := &execRun{tt: tt, dir: tt.t.TempDir(), runs: map[string]*execRec{}}
	x.bin = buildService(tt.t, x.dir)
	for range tt.cfg.paths {
		x.live = append(x.live, map[string][]execProc{})
	}
	for i := range tt.cfg.paths {
		x.writeRegistry(i)
	}
	for i := range execRunners {
		x.runners = append(x.runners, &execRunner{idx: i, proxy: zktest.NewProxy(tt.t, tt.cluster.Addrs()...)})
	}
	tt.exec = x
	tt.t.Logf("torture: %d zklock exec runners (session %v)", execRunners, execSession)
}

func (tt *torture) startExecRunners(ctx context.Context) {
	if tt.exec == nil {
		return
	}
	for _, r := range tt.exec.runners {
		tt.workers.Add(1)
		go tt.exec.loop(ctx, r)
	}
}

// armExec arms a runner with the fault: its next run carries it out.
func (tt *torture) armExec(f fault) {
	if tt.exec == nil {
		tt.counts.add("skipped." + f.kind.String())
		return
	}
	r := tt.exec.runners[f.slot%len(tt.exec.runners)]
	bit := uint32(1) << (f.kind - fExecKill)
	if r.armed.Or(bit)&bit != 0 {
		tt.counts.add("skipped." + f.kind.String())
	}
}

// stopExec runs after the workers have stopped: it resolves the survivors
// the commands saw, kills whatever is left (a violation already), and closes
// the proxies.
func (tt *torture) stopExec() {
	x := tt.exec
	if x == nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, s := range x.survivors {
		e := x.runs[s.earlier]
		if e == nil {
			tt.lg.violate("exec: %s's command found pid %d (state %s) of %s alive at %s, a run the test never saw start", s.later, s.pid, s.state, s.earlier, tt.lg.at(s.at))
			continue
		}
		if tt.lg.deletedBefore(e.rec.node, s.at) {
			tt.counts.add("exec.survivor_after_hand_deletion")
			continue
		}
		tt.lg.violate("exec: %s's command started at %s on %s while pid %d (state %s) of the earlier holder %s (node %s, token %d, command from %s) was alive",
			s.later, tt.lg.at(s.at), e.rec.path, s.pid, s.state, s.earlier, e.rec.node, e.rec.token, tt.lg.at(e.rec.start))
	}
	for i, runs := range x.live {
		for name, procs := range runs {
			for _, p := range procs {
				if alive, _ := p.alive(); alive {
					tt.lg.violate("exec: pid %d of %s on %s still alive after every runner stopped", p.pid, name, tt.cfg.paths[i])
					_ = syscall.Kill(p.pid, syscall.SIGKILL)
				}
			}
		}
	}
	for _, r := range x.runners {
		_ = r.proxy.Close()
	}
}

// deletedBefore reports whether node was deleted by hand at or before t.
func (lg *ledger) deletedBefore(node string, t mono) bool {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	for _, d := range lg.deletions {
		if d.node == node && d.at <= t {
			return true
		}
	}
	return false
}

// ---- the registry of live processes, by path ----

func (x *execRun) registry(i int) string { return filepath.Join(x.dir, fmt.Sprintf("p%d.live", i)) }

// writeRegistry replaces path i's registry file at once (a command reading
// it sees the old or the new list); x.mu is held, or the run has not begun.
func (x *execRun) writeRegistry(i int) {
	var b strings.Builder
	for name, procs := range x.live[i] {
		for _, p := range procs {
			fmt.Fprintf(&b, "%d %d %s\n", p.pid, p.start, name)
		}
	}
	tmp := x.registry(i) + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		x.tt.t.Errorf("exec registry: %v", err)
		return
	}
	if err := os.Rename(tmp, x.registry(i)); err != nil {
		x.tt.t.Errorf("exec registry: %v", err)
	}
}

func (x *execRun) register(i int, name string, p execProc) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.live[i][name] = append(x.live[i][name], p)
	x.writeRegistry(i)
}

func (x *execRun) unregister(i int, name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.live[i], name)
	x.writeRegistry(i)
}

// procStat reads a process's state and start time; ok false if it is gone.
func procStat(pid int) (state string, start uint64, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, false
	}
	return parseStat(string(b))
}

// parseStat parses a /proc/pid/stat line (the comm field may hold spaces).
func parseStat(line string) (state string, start uint64, ok bool) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return "", 0, false
	}
	f := strings.Fields(line[i+1:])
	if len(f) < 20 {
		return "", 0, false
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	return f[0], start, err == nil
}

// alive: the process exists, is not a zombie, and is the one recorded.
func (p execProc) alive() (bool, string) {
	state, start, ok := procStat(p.pid)
	if !ok || start != p.start || state == "Z" || state == "X" {
		return false, state
	}
	return true, state
}

// ---- the runners ----

func (x *execRun) loop(ctx context.Context, r *execRunner) {
	defer x.tt.workers.Done()
	rng := rand.New(rand.NewPCG(x.tt.cfg.seed, uint64(execStream+r.idx)))
	for ctx.Err() == nil {
		x.run(ctx, r, rng)
		sleepCtx(ctx, randDur(rng, 50*time.Millisecond, 400*time.Millisecond))
	}
}

type execLine struct {
	text string
	at   mono
}

// execPlan is what one run draws.
type execPlan struct {
	path                 int
	stubborn, closedErr  bool
	stubArmed            bool
	armed                uint32 // the faults it took from the runner (given back if the command never starts)
	kill, tstp, stall    bool
	grace, maxHold, hold time.Duration
	timeout              time.Duration
	faultAt              time.Duration // into the hold
	stallFor             time.Duration
	cut                  bool
}

func (x *execRun) plan(r *execRunner, rng *rand.Rand) execPlan {
	armed := r.armed.Swap(0)
	has := func(k faultKind) bool { return armed&(1<<(k-fExecKill)) != 0 }
	p := execPlan{path: rng.IntN(len(x.tt.cfg.paths)), stubborn: rng.IntN(4) == 0 || has(fExecStubborn),
		stubArmed: has(fExecStubborn), closedErr: has(fExecStderr), kill: has(fExecKill), tstp: has(fExecTstp), stall: has(fExecStall),
		grace: randDur(rng, 200*time.Millisecond, time.Second), timeout: randDur(rng, time.Second, 5*time.Second)}
	if rng.IntN(6) == 0 {
		p.grace = randDur(rng, 3*time.Second, 5*time.Second) // longer than the session: the reaper must not wait for it
	}
	if rng.IntN(3) < 2 || p.closedErr {
		p.maxHold = randDur(rng, 500*time.Millisecond, 3*time.Second)
	}
	p.hold = randDur(rng, 20*time.Millisecond, 500*time.Millisecond)
	if rng.IntN(5) == 0 {
		p.hold = randDur(rng, time.Second, 4*time.Second)
	}
	if p.kill || p.tstp || p.stall {
		p.hold = max(p.hold, randDur(rng, 1500*time.Millisecond, 3*time.Second))
	}
	if p.closedErr {
		p.stubborn = true
		p.hold = max(p.hold, p.maxHold+time.Second) // zklock writes at the limit
	}
	p.faultAt = randDur(rng, p.hold/10, p.hold*3/4)
	p.stallFor = randDur(rng, execSession/10, 5*execSession/2)
	p.cut = rng.IntN(2) == 0
	p.armed = armed
	if p.kill && p.tstp {
		p.tstp = false
		p.armed &^= 1 << (fExecTstp - fExecKill)
		r.armed.Or(1 << (fExecTstp - fExecKill)) // the next run's
	}
	return p
}

// run is one `zklock exec`: started, followed line by line, its processes
// polled until all are dead, and its end put in the ledger.
func (x *execRun) run(ctx context.Context, r *execRunner, rng *rand.Rand) {
	tt := x.tt
	p := x.plan(r, rng)
	path := tt.cfg.paths[p.path]
	name := fmt.Sprintf("x%d#%d", r.idx, x.seq.Add(1))
	args := []string{"exec", "--servers", r.proxy.Addr(), "--session-timeout", execSession.String(), "--grace", p.grace.String(),
		"--timeout", p.timeout.String(), "--owner", name}
	if p.maxHold > 0 {
		args = append(args, "--max-hold", p.maxHold.String())
	}
	stub := "0"
	if p.stubborn {
		stub = "1"
	}
	args = append(args, path, "--", "sh", "-c", execScript, x.registry(p.path), stub, strconv.FormatFloat(p.hold.Seconds(), 'f', 3, 64))
	cmd := exec.Command(x.bin, args...)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	out, w, err := os.Pipe()
	if err != nil {
		tt.t.Errorf("exec: %v", err)
		return
	}
	cmd.Stdout = w
	errFile := filepath.Join(x.dir, fmt.Sprintf("x%d.stderr", r.idx))
	var ew *os.File
	if p.closedErr {
		var er *os.File
		if er, ew, err = os.Pipe(); err == nil {
			er.Close() // the reader is gone, as with 2>&1 | head
		}
	} else {
		ew, err = os.Create(errFile)
	}
	if err != nil {
		out.Close()
		w.Close()
		tt.t.Errorf("exec: %v", err)
		return
	}
	cmd.Stderr = ew
	err = cmd.Start()
	w.Close()
	ew.Close()
	if err != nil {
		out.Close()
		tt.lg.violate("exec: starting zklock: %v", err)
		return
	}
	tt.counts.add("exec.runs")
	lines := make(chan execLine, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- execLine{sc.Text(), monoNow()}
		}
	}()
	exitedC := make(chan struct{})
	exited := (<-chan struct{})(exitedC)
	var state *os.ProcessState
	go func() {
		_ = cmd.Wait() // a non-zero exit is judged from cmd.ProcessState
		state = cmd.ProcessState
		close(exitedC)
	}()
	linesC := lines
	defer func() {
		<-exitedC
		out.Close() // ends the reader, should a writer be left
		for range linesC {
		}
	}()

	var (
		rec              *leaseRec
		done             = make(chan struct{})
		procs            []execProc
		lastAlive        mono
		exitAt           mono
		eof              bool
		killed, stopping bool
		commandEnded     bool
		faultT           <-chan time.Time
		tstpCheck        <-chan time.Time
		stallWG          sync.WaitGroup
	)
	defer stallWG.Wait()
	poll := time.NewTicker(execPoll)
	defer poll.Stop()
	sigZk := func(sig syscall.Signal) { _ = cmd.Process.Signal(sig) }
	finished := func() bool {
		if exitAt == 0 {
			return false
		}
		t0 := monoNow()
		anyAlive := false
		for _, pr := range procs {
			if ok, _ := pr.alive(); ok {
				anyAlive = true
			}
		}
		if anyAlive {
			lastAlive = t0
			if time.Duration(t0-exitAt) > execSurvival {
				tt.lg.violate("exec: a process of %s on %s (pids %v) lived %v after zklock exited (%v); stderr:\n%s",
					name, path, procs, time.Duration(t0-exitAt).Round(time.Millisecond), state, x.stderrTail(errFile, p.closedErr))
				// The command's group (its id is the command's pid, not
				// reused while a member lives), then each process.
				_ = syscall.Kill(-procs[0].pid, syscall.SIGKILL)
				for _, pr := range procs {
					_ = syscall.Kill(pr.pid, syscall.SIGKILL)
				}
				return true
			}
			return false
		}
		return eof || rec == nil && time.Duration(monoNow()-exitAt) > execSurvival
	}
	ctxDone := ctx.Done()
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				eof, lines = true, nil
				break
			}
			f := strings.Fields(l.text)
			switch {
			case len(f) >= 4 && f[0] == "seen":
				x.seen(name, f, l)
			case len(f) == 4 && f[0] == "start" && rec == nil:
				pid, _ := strconv.Atoi(f[1])
				token, _ := strconv.ParseInt(f[3], 10, 64)
				rec = &leaseRec{path: path, node: f[2], owner: name, holder: name + " exec", start: l.at, planned: l.at + mono(p.hold), done: done, exec: true}
				tt.lg.grant(rec)
				tt.lg.setToken(rec, token)
				tt.counts.add("grant.exec")
				x.mu.Lock()
				x.runs[name] = &execRec{name: name, rec: rec}
				x.mu.Unlock()
				x.track(p.path, name, pid, &procs)
				lastAlive = l.at
				if p.kill || p.tstp || p.stall {
					faultT = time.After(p.faultAt)
				}
				if p.stubborn {
					tt.counts.add("exec.stubborn")
				}
				if p.closedErr {
					tt.began(fExecStderr, "%s on %s (--max-hold %v)", name, path, p.maxHold.Round(time.Millisecond))
				} else if p.stubArmed {
					tt.began(fExecStubborn, "%s on %s (grace %v, --max-hold %v)", name, path, p.grace.Round(time.Millisecond), p.maxHold.Round(time.Millisecond))
				}
			case len(f) == 2 && f[0] == "child":
				pid, _ := strconv.Atoi(f[1])
				x.track(p.path, name, pid, &procs)
			case len(f) == 1 && f[0] == "end":
				commandEnded = true
				tt.counts.add("exec.command_ended")
			}
		case <-exited:
			exitAt, exited = monoNow(), nil
			var alive []int
			for _, pr := range procs {
				if ok, _ := pr.alive(); ok {
					alive = append(alive, pr.pid)
				}
			}
			x.exitStatus(name, path, state, killed, rec != nil, alive, p, errFile)
		case <-faultT:
			faultT = nil
			if exitAt != 0 {
				tt.counts.add("exec.fault_after_exit")
				break
			}
			switch {
			case p.kill:
				killed = true
				sigZk(syscall.SIGKILL)
				tt.began(fExecKill, "%s holding %s (grace %v)", name, path, p.grace.Round(time.Millisecond))
			case p.tstp && commandEnded:
				tt.counts.add("skipped." + fExecTstp.String())
			case p.tstp:
				sigZk(syscall.SIGTSTP)
				tt.began(fExecTstp, "%s holding %s", name, path)
				tstpCheck = time.After(300 * time.Millisecond)
			}
			if p.stall && r.busy.CompareAndSwap(false, true) {
				tt.began(fExecStall, "%s holding %s: its proxy for %v, then cut: %v", name, path, p.stallFor.Round(time.Millisecond), p.cut)
				stallWG.Add(1)
				go func() {
					defer stallWG.Done()
					defer r.busy.Store(false)
					r.proxy.Stall()
					sleepCtx(tt.ctx, p.stallFor)
					r.proxy.Resume()
					if p.cut {
						r.proxy.Cut()
					}
				}()
			} else if p.stall {
				tt.counts.add("skipped." + fExecStall.String())
			}
		case <-tstpCheck:
			tstpCheck = nil
			if exitAt != 0 {
				break // ended meanwhile (its pid may be another's now)
			}
			if st, _, ok := procStat(cmd.Process.Pid); ok && st == "T" {
				tt.lg.violate("exec: %s: zklock stopped on SIGTSTP while its command ran on %s (it must refuse)", name, path)
				sigZk(syscall.SIGCONT)
			} else {
				tt.counts.add("exec.tstp_refused")
			}
		case <-ctxDone:
			ctxDone = nil
			if exitAt == 0 && !stopping {
				stopping = true
				sigZk(syscall.SIGTERM) // passed on to the command; the lock is released after it
			}
		case <-poll.C:
			if exitAt == 0 {
				t0 := monoNow()
				for _, pr := range procs {
					if ok, _ := pr.alive(); ok {
						lastAlive = t0
						break
					}
				}
			}
		}
		if finished() {
			break
		}
	}
	x.unregister(p.path, name)
	if rec == nil {
		r.armed.Or(p.armed) // the command never started (a timeout, say): the next run's
	}
	if rec != nil {
		tt.lg.ended(rec, max(lastAlive, rec.start), errExecEnded)
		close(done)
	}
}

var errExecEnded = errors.New("the run's last process was seen alive")

// track adds a process of the run to the registry and to procs.
func (x *execRun) track(i int, name string, pid int, procs *[]execProc) {
	if pid <= 0 {
		return
	}
	_, start, ok := procStat(pid)
	if !ok {
		return // gone already
	}
	pr := execProc{pid: pid, start: start}
	*procs = append(*procs, pr)
	x.register(i, name, pr)
}

// seen is a "seen <run> <pid> <starttime> <stat line>" line: a process of an
// earlier run of the path, read in /proc by the command as it started.
func (x *execRun) seen(later string, f []string, l execLine) {
	pid, _ := strconv.Atoi(f[2])
	start, _ := strconv.ParseUint(f[3], 10, 64)
	state, st, ok := parseStat(strings.Join(f[4:], " "))
	if !ok || st != start || state == "Z" || state == "X" {
		x.tt.counts.add("exec.seen_dead")
		return
	}
	x.mu.Lock()
	x.survivors = append(x.survivors, execSurvivor{earlier: f[1], later: later, pid: pid, state: state, at: l.at})
	x.mu.Unlock()
}

// exitStatus tallies how zklock ended. A death by a signal the test did not
// send (SIGPIPE) while a process of the command's group lived, a usage
// error or a race report is a violation; such a death before the command
// started or after its group was gone is tallied (docs/cli.md: zklock
// ignores SIGPIPE while the command runs).
func (x *execRun) exitStatus(name, path string, st *os.ProcessState, killed, started bool, alive []int, p execPlan, errFile string) {
	tt := x.tt
	ws, _ := st.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled() && killed && ws.Signal() == syscall.SIGKILL:
		tt.counts.add("exec.killed")
	case ws.Signaled() && len(alive) > 0:
		tt.lg.violate("exec: %s on %s: zklock died of %v while pids %v of its command's group lived (closed stderr: %v); stderr:\n%s",
			name, path, ws.Signal(), alive, p.closedErr, x.stderrTail(errFile, p.closedErr))
	case ws.Signaled():
		when := "after_the_group"
		if !started {
			when = "before_the_command"
		}
		tt.counts.add(fmt.Sprintf("exec.died_of_%s_%s", strings.ReplaceAll(ws.Signal().String(), " ", "_"), when))
	case ws.ExitStatus() == 2 && tt.cfg.sw.service && strings.Contains(x.stderrTail(errFile, p.closedErr), "holds nested, a node of no lock recipe"):
		// The service's nestedAcquire makes a lock path inside this one when
		// the holding it asked under had just ended (issue 56 allows it then):
		// until a cleaner removes it, zklock refuses to share the path (2).
		tt.counts.add("exec.refused_nested")
	case slices.Contains([]int{2, 66}, ws.ExitStatus()):
		tt.lg.violate("exec: %s on %s: zklock exited %d; stderr:\n%s", name, path, ws.ExitStatus(), x.stderrTail(errFile, p.closedErr))
	default:
		tt.counts.add(fmt.Sprintf("exec.exit_%d", ws.ExitStatus()))
	}
	if p.closedErr {
		code := strconv.Itoa(ws.ExitStatus())
		if ws.Signaled() {
			code = ws.Signal().String()
		}
		tt.counts.add(fmt.Sprintf("exec.closed_stderr_started_%v_exit_%s", started, strings.ReplaceAll(code, " ", "_")))
	}
}

func (x *execRun) stderrTail(file string, closed bool) string {
	if closed {
		return "(a closed pipe)"
	}
	b, _ := os.ReadFile(file)
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}
