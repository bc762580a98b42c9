//go:build linux

package zklock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	mrand "math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zklock/zklock"
)

// Swarm testing (issue 27, lesson 33): a torture finds only what its
// configuration draws. Each run draws, from its seed, which dimensions of
// the configuration are on, and the choices each needs (which clients ask
// for how long a session, which connect under a chroot); the draw is logged
// with the seed, so -torture.seed=N replays the configuration with the fault
// schedule. -torture.swarm names the dimensions to turn on instead.
var tortureSwarm = flag.String("torture.swarm", "", "TestTorture's configuration: \"\" draws it from the seed; \"none\", \"all\", or a comma-separated list of "+strings.Join(swarmDims, ","))

// swarmDims are the dimensions, in the order they are drawn.
// "service" is drawn last, after the per-client choices, so that the seeds
// of before it draw the same configuration of the others.
var swarmDims = []string{"granted", "chroot", "revoke", "outage", "peer", "maxhold", "service", "pause", "skew", "exec", "fence", "rolling", "rollover", "lagging", "loss", "reconfig"}

// firstDims are the dimensions drawn before the per-client choices; the
// others ("service", "pause", "skew", "exec", "fence", then the operators'
// four) come after them, each added last so that
// earlier seeds still draw the configuration they drew before.
const firstDims = 6

const (
	swarmStream = 1 << 21 // the configuration's PCG stream, apart from the faults', the workers' and the child's

	// checkOutageClassified turns an Acquire that ended by its deadline
	// during an outage without errors.Is(err, zklock.ErrUnreachable) into
	// a violation (issue 27 row 5); either way the tallies count them
	// (outage.unreachable, outage.misclassified).
	checkOutageClassified = true
)

// swarmConfig is one run's configuration.
type swarmConfig struct {
	// granted: the servers grant at most tortureSession, and each client
	// asks asked[slot] (10 s or 30 s for most), as a client configured for
	// another ensemble would (issue 27 row 2).
	granted bool
	asked   []time.Duration
	// chroot: the clients with chroot[slot] connect under the torture's
	// root ("host:port/zklock-torture-…") and name every path below it;
	// they share the lock paths with the others, and now and then try a
	// guarded write whose op path would leave the chroot (row 4).
	chroot   bool
	chrooted []bool
	// revoke: a fault that takes a lock, has its node's data changed (a
	// request to release, or Proclaim) while the re-read that sets the
	// own-node watch again is on the wire, cuts the connection, and then
	// deletes the node (row 1).
	revoke bool
	// outage: all servers stopped more often and for longer, so waits end
	// during an outage; their errors are classified (row 5).
	outage bool
	// peer: a raw connection makes Apache Curator 5.5's read/write nodes,
	// the write-to-read downgrade included, on the RWMutex path (row 3).
	peer bool
	// maxhold: the clients with maxHold[slot] > 0 run every lease under
	// WithMaxHold (0.2..3 s): leases end by the limit mid-hold, Do's and
	// RunSingleton's fn is cancelled, and the next holder must not start
	// before the node is gone; every client waits WithBreakOverdue, so a
	// holder stalled past its limit is broken by the waiter behind it
	// (issue 29).
	maxhold bool
	maxHold []time.Duration
	// service: `zklock serve` runs on its own session and proxy, and a few
	// callers hold the torture's paths through it, with streams and with
	// leases (torture_service_test.go); the ensemble then grants at most
	// serviceSession, so that a lease's TTL can be 1 s (issue 41).
	service bool
	// pause: servers (the leader more often) are frozen (SIGSTOP) and
	// thawed, below the bound a held lease survives (0.4 T) or past
	// syncLimit × tickTime; the summary counts false_losses, leases ended
	// by the loss rule whose session lived (issue 47).
	pause bool
	// skew: the servers' clocks disagree (ids 1, 2 and 3 read the time,
	// tortureSkew ahead and tortureSkew behind; with maxhold, the smaller
	// tortureSkewMaxHold, within the grace WithBreakOverdue relies on), and
	// kill is drawn three times as often and kills the leader, so that
	// leader changes move ZooKeeper's time, and a job's periods with it,
	// back and forth; the jobs' retries and resets must then never run an
	// earlier period than the record's, and no record moves back (issue 54).
	skew bool
	// exec: a few runners run `zklock exec` (built from cmd/zklock) on the
	// mutex paths, whose command sometimes leaves a grandchild that
	// ignores SIGTERM; zklock is killed (SIGKILL), sent SIGTSTP, given a
	// stderr whose reader is gone, or cut off from ZooKeeper mid-hold, and
	// no process of an earlier holder may live while a later holder of the
	// path runs (issue 57; torture_exec_test.go).
	exec bool
	// fence: the fence module's torture runs beside the swarm on its
	// ensemble: holders paused past their session write under their tokens
	// to a fenced register in a real PostgreSQL, and every stale write must
	// be refused (issue 50; torture_fence_test.go). Drawn only for runs of
	// fenceMinDuration or more: make test runs that torture on its own.
	fence bool
	// rolling, rollover, lagging, loss: what operators and networks do to
	// the ensemble (issue 51; torture_operators_test.go): a rolling restart
	// of the three servers; leaders whose zxid counter runs out every
	// tortureRolloverRun transactions, so that the epoch rolls over and
	// tokens must still grow; a follower restored from a backup seconds
	// old; 1-20 % of one link's packets lost, one way. rolling, rollover
	// and lagging (and reconfig, below) are drawn, like fence, only for runs
	// of fenceMinDuration or more.
	rolling, rollover, lagging, loss bool
	// reconfig: the ensemble runs with dynamic reconfiguration, and a
	// member is now and then removed by a reconfig, wiped and added back by
	// another (the leader half the time); without server partitions, which
	// need static configs (issue 51).
	reconfig bool
}

func drawSwarm(seed uint64, clients int, forced string) (swarmConfig, error) {
	rng := mrand.New(mrand.NewPCG(seed, swarmStream))
	on := map[string]bool{}
	for _, d := range swarmDims[:firstDims] {
		on[d] = rng.IntN(2) == 0
	}
	switch forced {
	case "":
	case "all", "none":
		for _, d := range swarmDims {
			on[d] = forced == "all"
		}
	default:
		for _, d := range swarmDims {
			on[d] = false
		}
		for _, d := range strings.Split(forced, ",") {
			if !slices.Contains(swarmDims, d) {
				return swarmConfig{}, fmt.Errorf("-torture.swarm: unknown dimension %q (want %s)", d, strings.Join(swarmDims, ","))
			}
			on[d] = true
		}
	}
	sw := swarmConfig{granted: on["granted"], chroot: on["chroot"], revoke: on["revoke"], outage: on["outage"], peer: on["peer"], maxhold: on["maxhold"], service: on["service"], pause: on["pause"], skew: on["skew"], exec: on["exec"], fence: on["fence"],
		rolling: on["rolling"], rollover: on["rollover"], lagging: on["lagging"], loss: on["loss"], reconfig: on["reconfig"]}
	asks := []time.Duration{tortureSession, 10 * time.Second, 10 * time.Second, 30 * time.Second}
	sw.asked = make([]time.Duration, clients)
	sw.chrooted = make([]bool, clients)
	for i := range clients {
		ask, ch := asks[rng.IntN(len(asks))], rng.IntN(2) == 0
		sw.asked[i] = tortureSession
		if sw.granted {
			sw.asked[i] = ask
		}
		sw.chrooted[i] = sw.chroot && ch
	}
	if sw.chroot && !slices.Contains(sw.chrooted, true) {
		sw.chrooted[0] = true
	}
	sw.maxHold = make([]time.Duration, clients)
	for i := range clients {
		if d := randDur(rng, 200*time.Millisecond, 3*time.Second); sw.maxhold && (i == 0 || rng.IntN(2) == 0) {
			sw.maxHold[i] = d
		}
	}
	if service := rng.IntN(2) == 0; forced == "" {
		sw.service = service
	}
	if pause := rng.IntN(2) == 0; forced == "" {
		sw.pause = pause
	}
	if skew := rng.IntN(2) == 0; forced == "" {
		sw.skew = skew
	}
	if exec := rng.IntN(2) == 0; forced == "" {
		sw.exec = exec
	}
	if fence := rng.IntN(2) == 0; forced == "" {
		sw.fence = fence
	}
	for _, d := range []*bool{&sw.rolling, &sw.rollover, &sw.lagging, &sw.loss, &sw.reconfig} {
		if b := rng.IntN(2) == 0; forced == "" {
			*d = b
		}
	}
	return sw, nil
}

func (sw swarmConfig) String() string {
	onOff := func(b bool) string {
		if b {
			return "on"
		}
		return "off"
	}
	granted := onOff(sw.granted)
	if sw.granted {
		var asks []string
		for i, a := range sw.asked {
			asks = append(asks, fmt.Sprintf("c%d:%v", i, a))
		}
		granted += fmt.Sprintf("(max %v; asked %s)", tortureSession, strings.Join(asks, " "))
	}
	chroot := onOff(sw.chroot)
	if sw.chroot {
		var cs []string
		for i, c := range sw.chrooted {
			if c {
				cs = append(cs, fmt.Sprintf("c%d", i))
			}
		}
		chroot += "(" + strings.Join(cs, ",") + ")"
	}
	maxhold := onOff(sw.maxhold)
	if sw.maxhold {
		var ms []string
		for i, d := range sw.maxHold {
			if d > 0 {
				ms = append(ms, fmt.Sprintf("c%d:%v", i, d.Round(time.Millisecond)))
			}
		}
		maxhold += "(" + strings.Join(ms, " ") + ")"
	}
	return fmt.Sprintf("swarm{granted=%s chroot=%s revoke=%s outage=%s peer=%s maxhold=%s service=%s pause=%s skew=%s exec=%s fence=%s rolling=%s rollover=%s lagging=%s loss=%s reconfig=%s}", granted, chroot, onOff(sw.revoke), onOff(sw.outage), onOff(sw.peer), maxhold, onOff(sw.service), onOff(sw.pause), onOff(sw.skew), onOff(sw.exec), onOff(sw.fence),
		onOff(sw.rolling), onOff(sw.rollover), onOff(sw.lagging), onOff(sw.loss), onOff(sw.reconfig))
}

// flags renders the configuration for a replay line.
func (sw swarmConfig) flags() string {
	var on []string
	for d, b := range map[string]bool{"granted": sw.granted, "chroot": sw.chroot, "revoke": sw.revoke, "outage": sw.outage, "peer": sw.peer, "maxhold": sw.maxhold, "service": sw.service, "pause": sw.pause, "skew": sw.skew, "exec": sw.exec, "fence": sw.fence,
		"rolling": sw.rolling, "rollover": sw.rollover, "lagging": sw.lagging, "loss": sw.loss, "reconfig": sw.reconfig} {
		if b {
			on = append(on, d)
		}
	}
	if len(on) == 0 {
		return "none"
	}
	slices.Sort(on)
	return strings.Join(on, ",")
}

// ---- chroot: the sentinel beside the torture's root ----

// sentinelSuffix: under the chroot /zklock-torture-N-P, an op path
// "-sentinel", put after the chroot as a string, names
// /zklock-torture-N-P-sentinel, a tree outside the chroot (row 4).
const sentinelSuffix = "-sentinel"

func (tt *torture) sentinel() string { return tt.cfg.root + sentinelSuffix }

// makeSentinel creates the tree a chroot client must never reach: data
// "tenant-b" at version 0 and one child, "victim".
func (tt *torture) makeSentinel() {
	acl := zk.WorldACL(zk.PermAll)
	if _, err := tt.obs.Create(tt.sentinel(), []byte("tenant-b"), 0, acl); err != nil {
		tt.t.Fatalf("creating %s: %v", tt.sentinel(), err)
	}
	if _, err := tt.obs.Create(tt.sentinel()+"/victim", []byte("keep"), 0, acl); err != nil {
		tt.t.Fatalf("creating %s/victim: %v", tt.sentinel(), err)
	}
}

// checkSentinel: nothing outside the chroot changed.
func (tt *torture) checkSentinel() {
	data, stat, err := tt.obs.Get(tt.sentinel())
	kids, _, kerr := tt.obs.Children(tt.sentinel())
	switch {
	case err != nil || kerr != nil:
		tt.lg.violate("the sentinel %s outside the chroot: %v %v", tt.sentinel(), err, kerr)
	case string(data) != "tenant-b" || stat.Version != 0 || !slices.Equal(kids, []string{"victim"}):
		tt.lg.violate("a write reached outside the chroot: the sentinel %s holds %q at version %d with children %v (want \"tenant-b\", 0, [victim])",
			tt.sentinel(), data, stat.Version, kids)
	}
}

func (tt *torture) removeSentinel() {
	if kids, _, err := tt.obs.Children(tt.sentinel()); err == nil {
		for _, k := range kids {
			_ = tt.obs.Delete(tt.sentinel()+"/"+k, -1)
		}
	}
	_ = tt.obs.Delete(tt.sentinel(), -1)
}

// escape: a chroot client's guarded write whose op path would leave the
// chroot if the chroot were put in front of it as a string. It must be
// refused; one that is not, or any change to the sentinel, is a violation.
func (o *op) escape(l *zklock.Lease) {
	if !o.s.chroot {
		return
	}
	var bad any
	switch o.rng.IntN(3) {
	case 0:
		bad = &zk.SetDataRequest{Path: sentinelSuffix, Data: []byte("escaped"), Version: -1}
	case 1:
		bad = &zk.CreateRequest{Path: sentinelSuffix + "/escaped", Acl: zk.WorldACL(zk.PermAll)}
	default:
		bad = &zk.DeleteRequest{Path: sentinelSuffix + "/victim", Version: -1}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := l.Multi(ctx, bad)
	o.tt.counts.add("chroot.escape_tried")
	switch {
	case err == nil:
		o.tt.lg.violate("%s: a guarded write under the chroot with op path %q landed outside it (%s)", o.who, sentinelSuffix, o.tt.sentinel())
	case errors.Is(err, zklock.ErrInvalidPath):
		o.tt.counts.add("chroot.escape_refused")
	}
}

// ---- revoke: a data change on a held node, the re-read cut ----

const (
	revokeDelay = 20 * time.Millisecond // each way, on the holder's connection while the fault aims its cut
	// deletionBound: a lease whose node was deleted while it held ends
	// (Done closes, or its Release is called) within this of the deletion:
	// its own-node watch fires, or, cut off, its loss clock ends it.
	deletionBound = tortureSession + overshootSlack
)

// revokeCut takes a lock on the client, then changes its node's data (a
// request to release written as Curator's Revoker writes it, or, as a
// leader, Proclaim) with the client's connection slowed, so that the
// monitor's re-read that sets the own-node watch again is on the wire when
// the fault cuts the connection. The request must still be heard, and once
// the test deletes the node the lease must end (row 1: a monitor that gave
// the watch up held on beside the next holder). Half the time the client
// first takes a path of its own twice, so that its lease, granted at once,
// is watched through its listing: it sets its node's watch only when
// RevokeRequested is called, after the cut, and must still hear within the
// same bound.
func (tt *torture) revokeCut(s *slot, f fault) {
	c := s.client(tt.ctx)
	if c == nil {
		return
	}
	proclaim := f.flag
	path := tt.cfg.paths[f.path]
	warm := !proclaim && f.u2 < 0.5
	if warm { // a path of its own, which only this fault takes: held at once
		path = fmt.Sprintf("%s/revoke/c%d/lock", tt.cfg.root, s.idx)
	}
	o := &op{tt: tt, s: s, c: c, who: fmt.Sprintf("c%d/revoke", s.idx), path: path}
	ctx, cancel := context.WithTimeout(tt.ctx, 5*time.Second)
	defer cancel()
	var l *zklock.Lease
	var lead *zklock.Leadership
	var err error
	if proclaim {
		var e *zklock.Election
		if e, err = c.NewElection(o.lp(path)); err == nil {
			if lead, err = e.Campaign(ctx, o.who); err == nil {
				l = lead.Lease()
			}
		}
	} else {
		var m *zklock.Mutex
		if m, err = c.NewMutex(o.lp(path)); err == nil {
			if warm {
				o.warmAtOnce(ctx, m)
			}
			l, err = m.Acquire(ctx)
		}
	}
	at := monoNow()
	if err != nil {
		tt.counts.add("skipped." + f.kind.String())
		return
	}
	r := o.granted("revoke", l, at, time.Minute, "")
	defer o.release(r, l.Release)
	if zklock.ListWatched(l) {
		tt.counts.add("revoke.listwatched")
	}
	how := "asked to release"
	if proclaim {
		how = "proclaimed"
	}
	tt.began(f.kind, "c%d holds %s, %s, its re-read cut", s.idx, r.node, how)

	p := s.proxy
	p.SetDelay(revokeDelay)
	p.Cut()
	if !sleepCtx(tt.ctx, 300*time.Millisecond) {
		p.SetDelay(0)
		return
	}
	_, recv0 := p.Bytes()
	if proclaim {
		pctx, pcancel := context.WithTimeout(tt.ctx, 3*time.Second)
		err = lead.Proclaim(pctx, o.who)
		pcancel()
	} else {
		_, err = tt.obs.Set(r.node, []byte("__REVOKE__"), -1)
		// The event reaches the client revokeDelay later.
		waitUntil(time.Second, func() bool { _, recv := p.Bytes(); return recv > recv0 })
	}
	if err == nil {
		// The re-read (length, xid, op, path, watch flag) goes out
		// revokeDelay after the event came in; its reply is another
		// 2*revokeDelay away. Cut when it has gone.
		sent0, _ := p.Bytes()
		aimed := waitUntil(4*revokeDelay, func() bool { sent, _ := p.Bytes(); return sent >= sent0+int64(17+len(r.node)) })
		tt.counts.add(fmt.Sprintf("revoke.cut_aimed_%v", aimed))
	}
	p.SetDelay(0)
	p.Cut()
	if err != nil {
		tt.counts.add("revoke.change_failed")
		return
	}

	if !proclaim {
		listened := monoNow()
		select {
		case <-l.RevokeRequested():
			tt.counts.add("revoke.heard")
		case <-l.Done():
		case <-time.After(deletionBound):
			tt.lg.violate("%s: the request to release %s (granted at %s, watched through its listing: %v), asked for and cut at %s, was not heard within %v, and the lease holds",
				o.who, r.node, tt.lg.at(at), zklock.ListWatched(l), tt.lg.at(listened), deletionBound)
		}
	}
	if isClosed(l.Done()) {
		return
	}
	del := monoNow()
	if err := tt.obs.Delete(r.node, -1); err != nil {
		return
	}
	tt.lg.handDeleted(handDeletion{node: r.node, at: del})
	tt.lg.note("revoke: deleted " + r.node)
	select {
	case <-l.Done():
	case <-time.After(deletionBound + 500*time.Millisecond): // the checker reports it (deletedEnds)
	}
}

// warmAtOnce takes and gives up m twice: if both held at once, the next
// acquisition expects to, and its lease is watched through its listing,
// which hears a request to release only once RevokeRequested asks.
func (o *op) warmAtOnce(ctx context.Context, m *zklock.Mutex) {
	for range 2 {
		l, err := m.Acquire(ctx)
		if err != nil {
			return
		}
		o.release(o.granted("revoke_warm", l, monoNow(), time.Minute, ""), l.Release)
	}
}

// waitUntil polls cond every millisecond for up to d.
func waitUntil(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// ---- outage: waits that end while every server is down ----

// outageSettle: how long after every server went down a client's waits must
// say so.
const outageSettle = 500 * time.Millisecond

// classify checks the error of an Acquire that ended by its deadline dl
// while every server was down (row 5: it must be ErrUnreachable, not plain
// contention).
func (tt *torture) classify(what string, dl, at mono, err error) {
	if dl == 0 || err == nil || at < dl || !tt.lg.inOutage(dl) {
		return
	}
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, zklock.ErrUnreachable) {
		return
	}
	if errors.Is(err, zklock.ErrUnreachable) {
		tt.counts.add("outage.unreachable")
		return
	}
	tt.counts.add("outage.misclassified")
	if checkOutageClassified {
		tt.lg.violate("%s: its deadline (%s) passed while every server was down, and its error does not say so: %v", what, tt.lg.at(dl), err)
	}
}

// ---- peer: Apache Curator 5.5's read/write nodes on the RWMutex path ----

// curatorPeer makes InterProcessReadWriteLock's nodes, name for name, with a
// raw connection: a writer (_c_<32 hex>-__WRIT__, ephemeral sequential)
// holds when no node sorts ahead of it; a reader (_c_<32 hex>-__READ__)
// when no writer does; half its write holds end in Curator 5.5's downgrade
// (a plain ephemeral _c_<32 hex>-__READ__<the writer's 10 digits>, then the
// writer's node deleted). Its holds are in the ledger like zklock's. It
// treats any disconnection as the end of what it holds and starts again on a
// new session, closing the old one (so its nodes go with it).
type curatorPeer struct {
	tt   *torture
	path string
	rng  *mrand.Rand
	stop chan struct{}
	wg   sync.WaitGroup

	conn *zk.Conn
	lost chan struct{} // closed when conn disconnects
}

func (tt *torture) startPeer() {
	if !tt.cfg.sw.peer {
		return
	}
	p := &curatorPeer{tt: tt, path: tt.cfg.rwPath, rng: mrand.New(mrand.NewPCG(tt.cfg.seed, swarmStream+1)), stop: make(chan struct{})}
	tt.peer = p
	p.wg.Add(1)
	go p.run()
}

func (tt *torture) stopPeer() {
	if tt.peer == nil {
		return
	}
	close(tt.peer.stop)
	tt.peer.wg.Wait()
}

func (p *curatorPeer) stopped() bool {
	select {
	case <-p.stop:
		return true
	default:
		return false
	}
}

func (p *curatorPeer) run() {
	defer p.wg.Done()
	defer p.close()
	for !p.stopped() {
		if p.conn == nil && !p.connect() {
			sleepCh(p.stop, 200*time.Millisecond)
			continue
		}
		write := p.rng.IntN(2) == 0
		if err := p.cycle(write); err != nil {
			p.tt.counts.add("peer.reset")
			p.close()
		}
		sleepCh(p.stop, randDur(p.rng, 0, 50*time.Millisecond))
	}
}

func sleepCh(stop <-chan struct{}, d time.Duration) {
	select {
	case <-stop:
	case <-time.After(d):
	}
}

func (p *curatorPeer) connect() bool {
	conn, events, err := zk.Connect(p.tt.cluster.Addrs(), tortureSession, zk.WithLogger(log.New(io.Discard, "", 0)), zk.WithLogInfo(false))
	if err != nil {
		return false
	}
	deadline := time.After(10 * time.Second)
	for conn.State() != zk.StateHasSession {
		select {
		case <-events:
		case <-deadline:
			conn.Close()
			return false
		case <-p.stop:
			conn.Close()
			return false
		}
	}
	lost := make(chan struct{})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		closed := false
		for ev := range events {
			if ev.Type == zk.EventSession && ev.State != zk.StateHasSession && ev.State != zk.StateConnected && !closed {
				close(lost)
				closed = true
			}
		}
		if !closed {
			close(lost)
		}
	}()
	p.conn, p.lost = conn, lost
	return true
}

// close ends the session: its ephemeral nodes go with it.
func (p *curatorPeer) close() {
	if p.conn != nil {
		p.conn.Close()
		p.conn = nil
	}
}

func curatorName(path, marker string) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return path + "/_c_" + hex.EncodeToString(b) + "-" + marker
}

var errPeerLost = errors.New("peer: disconnected")

// cycle takes the lock as a writer or a reader (3 s at most), holds it a
// while and lets it go, a writer half the time by the downgrade.
func (p *curatorPeer) cycle(write bool) error {
	acl := zk.WorldACL(zk.PermAll)
	marker := "__READ__"
	if write {
		marker = "__WRIT__"
	}
	node, err := p.conn.Create(curatorName(p.path, marker), nil, zk.FlagEphemeral|zk.FlagSequence, acl)
	if errors.Is(err, zk.ErrNoNode) {
		return nil // the path is not there (yet, or any more): zklock's clients make it
	}
	if err != nil {
		return err
	}
	held, err := p.wait(node, write, monoNow()+mono(3*time.Second))
	if err != nil || !held {
		if err == nil {
			err = p.conn.Delete(node, -1)
		}
		return err
	}
	kind := "read"
	if write {
		kind = "write"
	}
	hold := randDur(p.rng, 0, 150*time.Millisecond)
	r := &leaseRec{path: p.path, node: node, holder: "curator-peer " + kind, start: monoNow(), shared: !write}
	r.planned = r.start + mono(hold)
	p.tt.lg.grant(r)
	p.tt.counts.add("grant.peer_" + kind)
	if !p.hold(r, hold) {
		return errPeerLost
	}
	if write && p.rng.IntN(2) == 0 {
		// Curator 5.5's downgrade (CURATOR-621): a plain ephemeral reader
		// numbered as the writer, then the writer's node deleted.
		p.tt.lg.ended(r, monoNow(), zklock.ErrReleased)
		rnode, err := p.conn.Create(curatorName(p.path, "__READ__")+node[len(node)-10:], nil, zk.FlagEphemeral, acl)
		if err != nil {
			return err
		}
		rr := &leaseRec{path: p.path, node: rnode, holder: "curator-peer downgraded read", start: monoNow(), shared: true}
		rr.planned = rr.start + mono(hold)
		p.tt.lg.grant(rr)
		p.tt.counts.add("grant.peer_downgrade")
		if err := p.conn.Delete(node, -1); err != nil {
			p.tt.lg.ended(rr, monoNow(), errPeerLost)
			return err
		}
		if !p.hold(rr, randDur(p.rng, 0, 150*time.Millisecond)) {
			return errPeerLost
		}
		r, node = rr, rnode
	}
	p.tt.lg.ended(r, monoNow(), zklock.ErrReleased)
	return p.conn.Delete(node, -1)
}

// hold sleeps d; false if the connection was lost meanwhile (the hold then
// ends at that moment, as a careful Curator user's would on SUSPENDED).
func (p *curatorPeer) hold(r *leaseRec, d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-p.lost:
		p.tt.lg.ended(r, monoNow(), errPeerLost)
		return false
	}
}

// wait follows Curator's predicates: a writer holds when it sorts first; a
// reader when no writer sorts ahead of it. It watches the node that blocks
// it and looks again when that goes.
func (p *curatorPeer) wait(node string, write bool, deadline mono) (bool, error) {
	mine := node[strings.LastIndexByte(node, '/')+1:]
	for monoNow() < deadline {
		children, _, err := p.conn.Children(p.path)
		if err != nil {
			return false, err
		}
		nodes := curatorOrder(children)
		idx := slices.Index(nodes, mine)
		if idx < 0 {
			return false, errPeerLost // our node is gone
		}
		block := ""
		if write {
			if idx > 0 {
				block = nodes[idx-1]
			}
		} else {
			for _, n := range nodes[:idx] {
				if strings.Contains(n, "__WRIT__") {
					block = n
					break
				}
			}
		}
		if block == "" {
			return true, nil
		}
		_, _, ch, err := p.conn.GetW(p.path + "/" + block)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return false, err
		}
		select {
		case <-ch:
		case <-p.lost:
			return false, errPeerLost
		case <-p.stop:
			return false, nil
		case <-time.After(time.Duration(deadline - monoNow())):
		}
	}
	return false, nil
}

// curatorOrder sorts the lock nodes among children by the 10 digits after
// their marker, as Curator's StandardLockInternalsDriver.fixForSorting does.
func curatorOrder(children []string) []string {
	var nodes []string
	for _, c := range children {
		if len(c) >= 10 {
			if _, err := strconv.Atoi(c[len(c)-10:]); err == nil {
				nodes = append(nodes, c)
			}
		}
	}
	sort.SliceStable(nodes, func(i, j int) bool { return nodes[i][len(nodes[i])-10:] < nodes[j][len(nodes[j])-10:] })
	return nodes
}
