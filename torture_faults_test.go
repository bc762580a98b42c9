//go:build linux

package zklock_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/zklock/zklock/zktest"
)

// TestTorture's faults: drawn from the one seeded generator, injected into
// clients' connections (proxies), servers, lock nodes, event handlers,
// clients and the child process.

type faultKind int

const (
	fStallShort       faultKind = iota // shorter than the session timeout: the lease survives
	fStallLong                         // longer: the session expires
	fPartitionHolder                   // a long stall of a client in a long hold
	fCut                               // connections reset
	fBlock                             // connections reset and refused for a while
	fCutBeforeRelease                  // a reset right before the client's next Release
	fKill                              // kill -9 one server (sometimes the leader), restart it
	fRestartAll                        // stop all three servers, start them again
	fDeleteHolder                      // delete the holder's node by hand
	fDeleteWaiter                      // delete a waiter's node by hand, behind a long holder
	fSlowHandler                       // the event handler sleeps while events pour in
	fCloseWaiting                      // Close a client while it waits
	fSigstop                           // SIGSTOP the child process, SIGCONT it later
	fRevokeCut                         // swarm "revoke": a held node's data changed, the re-read cut, the node deleted
	fPartition                         // one server (sometimes the leader) cut off from the others, its clients still connected
	fSvcStallShort                     // swarm "service": the service's proxy stalled for less than its session timeout
	fSvcStallLong                      // swarm "service": the service's session cut (stalled for longer)
	fStreamKill                        // swarm "service": a stream caller's connection reset mid-hold
	fLeaseSilence                      // swarm "service": a lease caller stops its keep-alives mid-hold
	fPauseShort                        // swarm "pause": a server (often the leader) frozen below the bound (0.4 T)
	fPauseLong                         // swarm "pause": frozen past syncLimit × tickTime, sometimes past T
	fExecKill                          // swarm "exec": zklock exec killed (SIGKILL) while its command runs
	fExecTstp                          // swarm "exec": SIGTSTP (Ctrl-Z) to zklock exec while its command runs: it must refuse
	fExecStderr                        // swarm "exec": zklock exec's stderr a pipe whose reader is gone, its command past --max-hold
	fExecStubborn                      // swarm "exec": the command leaves a grandchild that ignores SIGTERM
	fExecStall                         // swarm "exec": zklock exec's proxy stalled mid-hold (for 0.1-2.5 T), then cut half the time
	fRolling                           // swarm "rolling": every server restarted in turn, the leader last
	fLagging                           // swarm "lagging": a follower restored from a backup seconds old
	fLoss                              // swarm "loss": 1-20 % of one link's packets lost, one way
	fReconfig                          // swarm "reconfig": a member removed by a reconfig, wiped, added back
	numFaultKinds
)

var faultKinds = [numFaultKinds]struct {
	name   string
	weight int
}{
	fStallShort:       {"stall_short", 12},
	fStallLong:        {"stall_long", 8},
	fPartitionHolder:  {"partition_holder", 5},
	fCut:              {"cut", 12},
	fBlock:            {"block", 4},
	fCutBeforeRelease: {"cut_before_release", 8},
	fKill:             {"kill", 5},
	fRestartAll:       {"restart_all", 1},
	fDeleteHolder:     {"delete_holder", 6},
	fDeleteWaiter:     {"delete_waiter", 6},
	fSlowHandler:      {"slow_handler", 4},
	fCloseWaiting:     {"close_waiting", 5},
	fSigstop:          {"sigstop", 6},
	fRevokeCut:        {"revoke_cut", 0}, // weighed by the swarm (weights)
	fPartition:        {"partition", 5},
	fSvcStallShort:    {"svc_stall_short", 0}, // weighed by the swarm (weights)
	fSvcStallLong:     {"svc_stall_long", 0},
	fStreamKill:       {"stream_kill", 0},
	fLeaseSilence:     {"lease_silence", 0},
	fPauseShort:       {"pause_short", 0}, // weighed by the swarm (weights)
	fPauseLong:        {"pause_long", 0},
	fExecKill:         {"exec_kill", 0}, // weighed by the swarm (weights)
	fExecTstp:         {"exec_tstp", 0},
	fExecStderr:       {"exec_stderr", 0},
	fExecStubborn:     {"exec_stubborn", 0},
	fExecStall:        {"exec_stall", 0},
	fRolling:          {"rolling", 0}, // weighed by the swarm (weights)
	fLagging:          {"lagging", 0},
	fLoss:             {"loss", 0},
	fReconfig:         {"reconfig", 0},
}

// weights are the faults' weights in this run's configuration.
func (tt *torture) weights() [numFaultKinds]int {
	var w [numFaultKinds]int
	for k := range numFaultKinds {
		w[k] = faultKinds[k].weight
	}
	if tt.cfg.sw.revoke {
		w[fRevokeCut] = 6
	}
	if tt.cfg.sw.outage {
		w[fRestartAll] = 5
	}
	if tt.cfg.sw.service {
		w[fSvcStallShort], w[fSvcStallLong], w[fStreamKill], w[fLeaseSilence] = 3, 4, 6, 6
	}
	if tt.cfg.sw.pause {
		w[fPauseShort], w[fPauseLong] = 8, 3
	}
	if tt.cfg.sw.skew { // leader changes move ZooKeeper's time
		w[fKill] = 15
	}
	if tt.cfg.sw.rolling {
		w[fRolling] = 2
	}
	if tt.cfg.sw.lagging {
		w[fLagging] = 4
	}
	if tt.cfg.sw.loss {
		w[fLoss] = 6
	}
	if tt.cfg.sw.reconfig { // server partitions need static configs
		w[fReconfig], w[fPartition] = 4, 0
	}
	if tt.cfg.sw.exec {
		w[fExecKill], w[fExecTstp], w[fExecStderr], w[fExecStubborn], w[fExecStall] = 4, 4, 3, 4, 3
	}
	return w
}

func (k faultKind) String() string { return faultKinds[k].name }

// fault is one scheduled fault with every random choice already made, so the
// schedule depends on the seed alone, not on what the run did so far. Where a
// fault needs a target in some state (a client that waits), it looks from
// slot onwards; if none is found, or its target is busy with another fault,
// it is skipped (and counted).
type fault struct {
	kind   faultKind
	slot   int
	path   int
	server int // -1: the leader of the moment
	u1, u2 float64
	flag   bool
}

func drawFault(rng *rand.Rand, weights [numFaultKinds]int, clients, paths int) fault {
	total := 0
	for _, w := range weights {
		total += w
	}
	n := rng.IntN(total)
	kind := faultKind(0)
	for ; n >= weights[kind]; kind++ {
		n -= weights[kind]
	}
	return fault{kind: kind, slot: rng.IntN(clients), path: rng.IntN(paths), server: rng.IntN(4) - 1,
		u1: rng.Float64(), u2: rng.Float64(), flag: rng.IntN(2) == 0}
}

// schedule draws faults from the one seeded generator until ctx ends.
func (tt *torture) schedule(ctx context.Context) {
	defer tt.bg.Done()
	rng := rand.New(rand.NewPCG(tt.cfg.seed, 0))
	weights := tt.weights()
	for {
		gap := randDur(rng, 150*time.Millisecond, 900*time.Millisecond)
		f := drawFault(rng, weights, len(tt.slots), len(tt.cfg.paths))
		if !sleepCtx(ctx, gap) {
			return
		}
		tt.inject(f)
	}
}

func (tt *torture) inject(f fault) {
	switch f.kind {
	case fRevokeCut:
		s := tt.slots[f.slot]
		tt.async(&s.busy, f, func() { tt.revokeCut(s, f) })
	case fStallShort, fStallLong, fCut, fBlock, fSlowHandler:
		s := tt.slots[f.slot]
		tt.async(&s.busy, f, func() { tt.proxyFault(s, f) })
	case fPartitionHolder:
		tt.onSlotWhere(f, func(s *slot) { tt.proxyFault(s, f) }, func(s *slot) bool { return s.longHolds.Load() > 0 })
	case fCloseWaiting:
		// Best while another worker of the client holds: Close must end
		// that lease before anyone else can be granted the lock.
		tt.onSlotWhere(f, tt.replaceClient,
			func(s *slot) bool { return s.waiting.Load() > 0 && s.holding.Load() > 0 },
			func(s *slot) bool { return s.waiting.Load() > 0 })
	case fCutBeforeRelease:
		tt.slots[f.slot].cutBeforeRelease.Store(true) // counted when a Release takes it
	case fKill, fRestartAll, fPartition, fPauseShort, fPauseLong, fRolling, fLagging, fLoss, fReconfig:
		if tt.cluster.External() {
			tt.counts.add("skipped." + f.kind.String())
			return
		}
		switch f.kind {
		case fPartition:
			tt.async(&tt.serverBusy, f, func() { tt.partitionServer(f) })
			return
		case fPauseShort, fPauseLong:
			tt.async(&tt.serverBusy, f, func() { tt.pauseServer(f) })
			return
		case fRolling:
			tt.async(&tt.serverBusy, f, func() { tt.rollingRestart(f) })
			return
		case fLagging:
			tt.async(&tt.serverBusy, f, func() { tt.restoreBackup(f) })
			return
		case fLoss:
			tt.async(&tt.lossBusy, f, func() { tt.lossyLink(f) })
			return
		case fReconfig:
			tt.async(&tt.serverBusy, f, func() { tt.replaceMember(f) })
			return
		}
		tt.async(&tt.serverBusy, f, func() { tt.serverFault(f) })
	case fDeleteHolder, fDeleteWaiter:
		tt.async(&tt.obsBusy, f, func() { tt.deleteByHand(f) })
	case fSvcStallShort, fSvcStallLong:
		tt.async(&tt.svc.busy, f, func() { tt.serviceFault(f) })
	case fStreamKill:
		tt.killStream(f)
	case fLeaseSilence:
		tt.silenceLease(f)
	case fExecKill, fExecTstp, fExecStderr, fExecStubborn, fExecStall:
		tt.armExec(f)
	case fSigstop:
		if tt.child == nil {
			tt.counts.add("skipped." + f.kind.String())
			return
		}
		tt.async(&tt.child.busy, f, func() {
			d := between(f.u1, tortureSession/5, 2*tortureSession)
			tt.child.pause(tt.lg, d, func() { tt.began(f.kind, "child for %v", d.Round(time.Millisecond)) })
			tt.lg.note("sigcont child")
		})
	}
}

// async runs a fault on its own goroutine unless busy says its target is
// already under a fault.
func (tt *torture) async(busy *atomic.Bool, f fault, run func()) {
	if !busy.CompareAndSwap(false, true) {
		tt.counts.add("skipped." + f.kind.String())
		return
	}
	tt.faults.Add(1)
	go func() {
		defer tt.faults.Done()
		defer busy.Store(false)
		run()
	}()
}

// onSlotWhere runs a client fault on the first free client from f.slot on
// that is in the state the fault needs, trying the states in order of
// preference.
func (tt *torture) onSlotWhere(f fault, run func(*slot), states ...func(*slot) bool) {
	for _, ok := range states {
		for i := range tt.slots {
			s := tt.slots[(f.slot+i)%len(tt.slots)]
			if ok(s) && !s.busy.Load() {
				tt.async(&s.busy, f, func() { run(s) })
				return
			}
		}
	}
	tt.counts.add("skipped." + f.kind.String())
}

// began counts a fault and notes it in the run's timeline.
func (tt *torture) began(k faultKind, format string, args ...any) {
	tt.counts.add("fault." + k.String())
	tt.lg.note(k.String() + " " + fmt.Sprintf(format, args...))
}

// proxyFault partitions, resets or refuses one client's connections.
func (tt *torture) proxyFault(s *slot, f fault) {
	p, name := s.proxy, fmt.Sprintf("c%d", s.idx)
	switch f.kind {
	case fStallShort:
		d := between(f.u1, tortureSession/10, 2*tortureSession/5)
		tt.began(f.kind, "%s for %v", name, d.Round(time.Millisecond))
		p.Stall()
		time.Sleep(d)
		p.Resume()
	case fStallLong, fPartitionHolder:
		d := between(f.u1, 6*tortureSession/5, 5*tortureSession/2)
		tt.began(f.kind, "%s for %v, then cut: %v", name, d.Round(time.Millisecond), f.flag)
		tt.cutOff(func() {
			p.Stall()
			time.Sleep(d)
			p.Resume()
		})
		if f.flag {
			p.Cut() // the stalled connections are stale: reconnect at once
		}
	case fCut:
		tt.began(f.kind, "%s", name)
		p.Cut()
	case fBlock:
		d := between(f.u1, tortureSession/2, 3*tortureSession)
		tt.began(f.kind, "%s for %v", name, d.Round(time.Millisecond))
		tt.cutOff(func() {
			p.Block(true)
			p.Cut()
			time.Sleep(d)
			p.Block(false)
		})
	case fSlowHandler:
		tt.slowEvents(s, f)
	}
	tt.lg.note("healed " + name)
}

// slowEvents makes the client's event handler sleep on every event for a
// few seconds while events pour in: after a reset, or after a stall long
// enough to expire the session (go-zookeeper then sends a burst of events,
// and drops what its small channel cannot hold).
func (tt *torture) slowEvents(s *slot, f fault) {
	window := between(f.u1, time.Second, 4*time.Second)
	tt.began(f.kind, "c%d for %v after a stall: %v", s.idx, window.Round(time.Millisecond), !f.flag)
	arm := func() {
		s.slow.delay.Store(int64(between(f.u2, 50*time.Millisecond, 800*time.Millisecond)))
		s.slow.until.Store(int64(monoNow() + mono(window)))
	}
	if f.flag {
		arm()
		s.proxy.Cut()
	} else {
		tt.cutOff(func() {
			s.proxy.Stall()
			time.Sleep(3 * tortureSession / 2)
			arm()
			s.proxy.Resume()
			s.proxy.Cut()
		})
	}
	time.Sleep(window)
}

// cutOff runs fn with the client counted as cut off, for the hot-loop check.
func (tt *torture) cutOff(fn func()) {
	tt.cutoff.Add(1)
	defer tt.cutoff.Add(-1)
	fn()
}

// replaceClient closes a client while one of its workers waits, and puts a
// fresh client in its place.
func (tt *torture) replaceClient(s *slot) {
	tt.began(fCloseWaiting, "c%d", s.idx)
	s.mu.Lock()
	old := s.cur
	s.ready = make(chan struct{})
	s.retired[old] = true
	s.mu.Unlock()
	tt.closeClient(old)
	for {
		c, err := tt.connect(s)
		if err == nil {
			s.mu.Lock()
			s.cur = c
			close(s.ready)
			s.mu.Unlock()
			tt.lg.note(fmt.Sprintf("c%d replaced", s.idx))
			return
		}
		if tt.ctx.Err() != nil {
			return
		}
		tt.t.Logf("client %d: reconnecting after close: %v", s.idx, err)
	}
}

// serverFault kills one server and restarts it, or restarts all three. Only
// one runs at a time, and each waits for the ensemble to be healthy again,
// so never are two servers down but by restart_all.
func (tt *torture) serverFault(f fault) {
	servers := tt.cluster.Servers()
	down := between(f.u1, 300*time.Millisecond, 4*time.Second)
	if f.kind == fRestartAll && tt.cfg.sw.outage {
		down = between(f.u1, time.Second, 6*time.Second) // long enough for waits to end in it
	}
	if f.kind == fKill {
		i := f.server
		if i < 0 || tt.cfg.sw.skew { // with skew, the leader: its change moves ZooKeeper's time
			i = -1
		}
		if i < 0 {
			if l, err := tt.cluster.Leader(); err == nil {
				i = l
			} else {
				i = 0
			}
		}
		servers = servers[i : i+1]
	}
	tt.began(f.kind, "server %v for %v (the leader: %v, graceful: %v)", serverIDs(servers), down.Round(time.Millisecond),
		f.kind == fKill && (f.server < 0 || tt.cfg.sw.skew), f.kind == fRestartAll && f.flag)
	for _, s := range servers {
		stop := s.Kill
		if f.kind == fRestartAll && f.flag {
			stop = s.Stop
		}
		if err := stop(); err != nil {
			tt.t.Errorf("harness: stopping server %d: %v", s.ID(), err)
		}
	}
	stopped := monoNow()
	time.Sleep(down)
	if f.kind == fRestartAll {
		tt.lg.outage(pauseSpan{stop: stopped, cont: monoNow()})
	}
	tt.restart(servers)
	tt.lg.note(fmt.Sprintf("servers %v healthy again", serverIDs(servers)))
}

// partitionServer cuts one server off from the other two while its clients
// stay connected (a follower then answers them for syncLimit × tickTime while
// the leader expires their sessions), heals it, and waits for the ensemble.
// It shares serverBusy with kills and restarts: a partitioned server cannot
// rejoin a quorum, so never are two servers out at once.
func (tt *torture) partitionServer(f fault) {
	i := f.server
	if i < 0 {
		i = tt.leaderOrFirst()
	}
	d := between(f.u1, 300*time.Millisecond, 2*tortureSession)
	tt.began(f.kind, "server %d from the others for %v (the leader: %v)", i+1, d.Round(time.Millisecond), f.server < 0)
	if err := tt.cluster.Partition(i); err != nil {
		tt.t.Errorf("harness: partitioning server %d: %v", i+1, err)
		return
	}
	time.Sleep(d)
	if err := tt.cluster.Heal(i); err != nil {
		tt.t.Errorf("harness: healing server %d: %v", i+1, err)
	}
	tt.healthyAgain("a partition", fmt.Sprintf("server %d healed", i+1))
}

// healthyAgain waits for the ensemble to serve again after a server fault
// (what), and notes it.
func (tt *torture) healthyAgain(what, note string) {
	ctx, cancel := context.WithTimeout(tt.ctx, 2*time.Minute)
	defer cancel()
	if err := tt.cluster.WaitHealthy(ctx); err != nil {
		tt.t.Errorf("harness: ensemble not healthy after %s: %v", what, err)
	}
	tt.lg.note(note)
}

// pauseServer freezes one server (SIGSTOP; the leader when f.server < 0)
// and thaws it: below the bound a held lease survives (0.1–0.35 T), or past
// the followers' patience (syncLimit × tickTime, 1 s here) up to 1.5 T, when
// they elect another leader and sessions may expire. Leases ended meanwhile
// whose session lived are the run's false losses.
func (tt *torture) pauseServer(f fault) {
	i := f.server
	if i < 0 {
		i = tt.leaderOrFirst()
	}
	d := between(f.u1, tortureSession/10, tortureSession*35/100)
	if f.kind == fPauseLong {
		d = between(f.u1, tortureSyncLimit*110/100, tortureSession*3/2)
	}
	tt.began(f.kind, "server %d for %v (the leader: %v)", i+1, d.Round(time.Millisecond), f.server < 0)
	if err := tt.cluster.Servers()[i].Pause(tt.ctx, d); err != nil {
		tt.t.Errorf("harness: pausing server %d: %v", i+1, err)
	}
	tt.healthyAgain("a pause", fmt.Sprintf("server %d thawed", i+1))
}

func serverIDs(servers []*zktest.Server) []int {
	var ids []int
	for _, s := range servers {
		ids = append(ids, s.ID())
	}
	return ids
}

// restart starts the servers together (an ensemble member serves only once a
// quorum is up) and waits until the ensemble is healthy.
func (tt *torture) restart(servers []*zktest.Server) {
	ctx, cancel := context.WithTimeout(tt.ctx, 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Restart(ctx); err != nil {
				tt.t.Errorf("harness: restarting server %d: %v", s.ID(), err)
			}
		}()
	}
	wg.Wait()
	if err := tt.cluster.WaitHealthy(ctx); err != nil {
		tt.t.Errorf("harness: ensemble not healthy after a restart: %v", err)
	}
}

// deleteByHand deletes a lock node behind its owner's back, as an operator
// or a tool would: the holder's node, or a waiter's while the holder ahead
// means to hold for a while yet (so no correct client can be granted on it;
// the paths are searched from f.path on for such a holder).
func (tt *torture) deleteByHand(f fault) {
	for i := range tt.cfg.paths {
		path := tt.cfg.paths[(f.path+i)%len(tt.cfg.paths)]
		children, _, err := tt.obs.Children(path)
		nodes := lockNodesInOrder(children)
		if err != nil || len(nodes) == 0 {
			continue
		}
		if f.kind == fDeleteHolder {
			tt.deleteNode(f, path+"/"+nodes[0], "")
			return
		}
		holder := path + "/" + nodes[0]
		if len(nodes) > 1 && tt.lg.holdsLong(path, holder, tt.ownerOf(holder), 500*time.Millisecond) {
			tt.deleteNode(f, path+"/"+nodes[1+int(f.u1*float64(len(nodes)-1))], holder)
			return
		}
	}
	tt.counts.add("skipped." + f.kind.String())
}

// deleteNode deletes node; with holder (a waiter's node deleted behind a
// holder), the deletion is clean only if holder's node is still there after
// it, read on the same session: the ledger's word that the holder means to
// hold is not enough (its lease may have ended unseen, a loss during a
// leader's pause, and its node gone first: the waiter is then granted
// before the deletion, rightly).
func (tt *torture) deleteNode(f fault, node, holder string) {
	owner := tt.ownerOf(node)
	at := monoNow()
	if err := tt.obs.Delete(node, -1); err != nil {
		tt.counts.add("skipped." + f.kind.String())
		return
	}
	clean := false
	if holder != "" {
		there, _, err := tt.obs.Exists(holder)
		clean = err == nil && there
	}
	tt.lg.handDeleted(handDeletion{node: node, owner: owner, at: at, clean: clean})
	tt.began(f.kind, "%s", node)
}

// ownerOf reads the explicit owner a lock node records, if any.
func (tt *torture) ownerOf(node string) string {
	data, _, err := tt.obs.Get(node)
	if err != nil {
		return ""
	}
	var rec struct {
		Owner string `json:"owner"`
	}
	_ = json.Unmarshal(data, &rec)
	return rec.Owner
}

// lockNodesInOrder returns the lock nodes among children in queue order.
func lockNodesInOrder(children []string) []string {
	var nodes []string
	for _, c := range children {
		if strings.Contains(c, "-lock-") && len(c) >= 10 {
			nodes = append(nodes, c)
		}
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i][len(nodes[i])-10:] < nodes[j][len(nodes[j])-10:] })
	return nodes
}

// ---- the hot-loop check ----

// cpuStats is owned by the sampler goroutine until bg.Wait.
type cpuStats struct {
	max    float64 // CPU-seconds per second, any window
	maxCut float64 // the same, in windows while a client was cut off
}

// sampleCPU measures this process's CPU time per wall second, once a second.
// A retry loop without back-off shows up as a core kept busy while a client
// cannot reach ZooKeeper.
func (tt *torture) sampleCPU(ctx context.Context) {
	defer tt.bg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	prevCPU, prevWall, streak := processCPU(), monoNow(), 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		cpu, wall := processCPU(), monoNow()
		rate := (cpu - prevCPU).Seconds() / time.Duration(wall-prevWall).Seconds()
		prevCPU, prevWall = cpu, wall
		tt.cpu.max = max(tt.cpu.max, rate)
		if tt.cutoff.Load() == 0 {
			streak = 0
			continue
		}
		tt.cpu.maxCut = max(tt.cpu.maxCut, rate)
		if rate <= hotLoopCPU {
			streak = 0
		} else if streak++; streak == hotLoopWindows {
			tt.lg.violate("hot loop: over %.1f CPU-seconds per second for %d s while a client was cut off (at %s)", hotLoopCPU, hotLoopWindows, tt.lg.at(wall))
		}
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
