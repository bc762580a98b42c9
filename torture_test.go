//go:build linux

package zklock_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// TestTorture is the randomized fault torture (issue 10): clients, each with
// its own session through its own proxy, contend for a few paths with Mutex,
// ReentrantMutex, TryAcquire, Do, RunSingleton and MultiLock, and for one
// path each with RWMutex readers and writers and a Semaphore of 2, while a
// fault schedule, drawn from one seeded generator, stalls, cuts and blocks their connections,
// kills and restarts servers, deletes lock nodes by hand, slows event
// handlers, closes clients while they wait, and stops a whole child process
// with SIGSTOP. The ledger (torture_check_test.go) then checks, on one
// monotonic clock: no two leases on a path overlap (readers may share, and
// up to 2 semaphore leases), fencing tokens of exclusive leases grow, no
// stale holder acts, every call returns by its deadline plus a bound, nothing
// is left in ZooKeeper, no goroutine leaked, and no hot loop burnt the CPU.
//
// `make test` runs a short profile; `make torture` a long one. A failing run
// prints its seed: -torture.seed=N replays its fault schedule.
var (
	tortureDuration = flag.Duration("torture.duration", time.Minute, "how long TestTorture injects faults")
	tortureClients  = flag.Int("torture.clients", 12, "in-process clients of TestTorture, each with its own session and proxy (8-32)")
	tortureSeed     = flag.Uint64("torture.seed", 0, "seed of TestTorture's fault schedule; 0 picks one from the clock (always logged)")
)

const (
	tortureSession = 2 * time.Second
	tortureTick    = 100 * time.Millisecond
	// tortureSyncLimit is how long the followers wait for a frozen leader
	// (syncLimit × tickTime) with the swarm's "pause" on: above the short
	// pauses, below the long ones. Otherwise ZooKeeper's sample syncLimit (5).
	tortureSyncLimit      = time.Second
	tortureCleanupDelay   = 200 * time.Millisecond
	tortureCleanupTimeout = time.Second
	tortureWorkers        = 2 // workers per client
	// overshootSlack is what a loaded 2-core machine running -race and three
	// JVMs adds to the library's own bound: a failing or cancelled Acquire
	// waits up to the cleanup timeout for its node's removal (Mutex.Acquire's
	// doc), and Do and RunSingleton release with the same timeout.
	overshootSlack = time.Second
	// closeBound is Close's documented bound: the cleanup timeout, plus up to
	// a second go-zookeeper gives its close request, plus the slack.
	closeBound = tortureCleanupTimeout + time.Second + overshootSlack
	// A hot loop: this process burns more than hotLoopCPU CPU-seconds per
	// second for hotLoopWindows seconds in a row while a client is cut off.
	// The JVMs are other processes and do not count; the whole torture takes
	// about 0.1-0.3 here, and one goroutine spinning takes a core (1.0).
	hotLoopCPU     = 0.8
	hotLoopWindows = 3
	settleTime     = 2 * time.Second // faults off, work on, before the end
)

type tortureConfig struct {
	seed     uint64
	duration time.Duration
	clients  int
	root     string   // the cleanup root; nothing is left under it at the end
	paths    []string // the contended lock paths (Mutex, ReentrantMutex, Do, RunSingleton, MultiLock)
	rwPath   string   // the RWMutex's path
	semPath  string   // the Semaphore's path
	sw       swarmConfig
}

// tortureSemLimit is the torture semaphore's N.
const tortureSemLimit = 2

func tortureSettings(t *testing.T) tortureConfig {
	cfg := tortureConfig{seed: *tortureSeed, duration: *tortureDuration, clients: *tortureClients}
	if cfg.seed == 0 {
		cfg.seed = uint64(time.Now().UnixNano())
	}
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "torture.duration" })
	if testing.Short() && !explicit {
		cfg.duration = 20 * time.Second
	}
	if cfg.clients < 1 || cfg.clients > 64 {
		t.Fatalf("-torture.clients=%d: want 1..64", cfg.clients)
	}
	cfg.root = fmt.Sprintf("/zklock-torture-%d-%d", cfg.seed, os.Getpid())
	cfg.paths = []string{cfg.root + "/a/lock", cfg.root + "/b/lock", cfg.root + "/deep/c/lock"}
	cfg.rwPath, cfg.semPath = cfg.root+"/rw/lock", cfg.root+"/sem"
	sw, err := drawSwarm(cfg.seed, cfg.clients, *tortureSwarm)
	if err != nil {
		t.Fatal(err)
	}
	if *tortureSwarm == "" && cfg.duration < fenceMinDuration {
		// make test's one-minute run: neither the fence's torture nor the
		// faults that restart servers or make leaders step down one after
		// another (TestOperatorFaults makes each of those there): with
		// rollover's step-downs beside skew's leader kills, a Release's
		// reconnections moved its loss deadline on past T (3.4 s).
		sw.fence, sw.rolling, sw.lagging, sw.reconfig, sw.rollover = false, false, false, false, false
	}
	cfg.sw = sw
	return cfg
}

func tortureOptions(root string, session time.Duration, onEvent func(zk.Event)) []zklock.Option {
	opts := []zklock.Option{
		zklock.WithSessionTimeout(session),
		zklock.WithCleanupDelay(tortureCleanupDelay),
		zklock.WithCleanupRoot(root),
		zklock.WithCleanupTimeout(tortureCleanupTimeout),
	}
	if onEvent != nil {
		opts = append(opts, zklock.WithEventHandler(onEvent))
	}
	return opts
}

func TestTorture(t *testing.T) {
	if apartTorture != nil {
		t.Parallel()
		apartTorture.report(t)
		return
	}
	leaveWithTheParent()
	cfg := tortureSettings(t)
	t.Logf("torture: seed=%d duration=%v clients=%d %v (replay: -torture.seed=%d -torture.clients=%d; the configuration is drawn from the seed)", cfg.seed, cfg.duration, cfg.clients, cfg.sw, cfg.seed, cfg.clients)
	baseline := goleak.IgnoreCurrent()
	tt := newTorture(t, cfg)
	tt.run()
	tt.finish()
	tt.checkGoroutines(baseline)
	tt.report()
}

// torture is one run. Each piece of state has one owner: the ledger its
// records, a slot its client, the scheduler the fault generator.
type torture struct {
	t       *testing.T
	cfg     tortureConfig
	cluster *zktest.Cluster
	obs     *zk.Conn // the test's own view of ZooKeeper, for deletes and the final check
	slots   []*slot
	child   *childProc // the process that SIGSTOP pauses
	lg      *ledger
	counts  counters
	cpu     cpuStats

	ctx        context.Context // the whole run; cancelled at the very end
	cancel     context.CancelFunc
	workers    sync.WaitGroup
	watchers   sync.WaitGroup // one per lease, stamping its end
	faults     sync.WaitGroup // faults under way
	bg         sync.WaitGroup // scheduler and CPU sampler
	stoppedAt  atomic.Int64   // mono: when the workers were told to stop
	cutoff     atomic.Int32   // clients currently cut off
	serverBusy atomic.Bool    // a server fault is under way (never two down)
	obsBusy    atomic.Bool    // a hand deletion is under way
	lossBusy   atomic.Bool    // a lossy link is under way (torture_operators_test.go)
	loss       *zktest.Loss   // nil unless the swarm draws "loss"
	verdict    verdict

	peer           *curatorPeer   // torture_swarm_test.go's; nil unless the swarm draws it
	jobs           jobTally       // torture_job_test.go's
	observerClient *zklock.Client // torture_elect_test.go's
	observerProxy  *zktest.Proxy
	leaderWatches  []leaderWatch
	svc            *svcRun   // torture_service_test.go's; nil unless the swarm draws it
	exec           *execRun  // torture_exec_test.go's; nil unless the swarm draws it
	fence          *fenceRun // torture_fence_test.go's; nil unless the swarm draws it
}

// tortureSkew is how far ahead and behind the second and third servers'
// clocks read with the swarm's "skew" on: a leader change moves ZooKeeper's
// time by up to twice that, longer than an election takes, so that the
// clock of a new leader behind still reads behind the records written just
// before. With "maxhold" on as well, tortureSkewMaxHold: a jump must stay
// below the grace a holder's limit is broken with (half of tortureSession),
// as WithBreakOverdue asks of the servers' clocks.
const (
	tortureSkew        = 2 * time.Second
	tortureSkewMaxHold = 350 * time.Millisecond
)

func newTorture(t *testing.T, cfg tortureConfig) *torture {
	tt := &torture{t: t, cfg: cfg, lg: newLedger(tortureCleanupTimeout + overshootSlack), counts: counters{m: map[string]int{}}}
	tt.ctx, tt.cancel = context.WithCancel(context.Background())
	t.Cleanup(tt.cancel)
	if os.Getenv(zktest.EnvServers) != "" {
		tt.cluster = zktest.Start(t) // external servers: no server faults
	} else {
		// A short container check: each client's cleaner removes only the
		// paths it created, the server the ones others used last.
		// The servers grant at most tortureSession (20 ticks, ZooKeeper's
		// default maximum, made explicit): with the swarm's "granted" on,
		// clients ask for far more.
		// With the swarm's "service" on, at most serviceSession: the
		// service's leases need a session of three times their TTL (1 s).
		maxSession := tortureSession
		if cfg.sw.service {
			maxSession = serviceSession
		}
		opts := []zktest.Option{zktest.WithEnsemble(3), zktest.WithTickTime(tortureTick), zktest.WithMaxSessionTimeout(maxSession),
			zktest.WithSyncLimit(syncLimitTicks(cfg.sw)),
			zktest.WithContainerCheck(200 * time.Millisecond), zktest.WithLogf(nil)}
		if !cfg.sw.reconfig { // partitions need static configs
			opts = append(opts, zktest.WithPartitions())
		}
		if cfg.sw.skew {
			d := tortureSkew
			if cfg.sw.maxhold {
				d = tortureSkewMaxHold
			}
			opts = append(opts, zktest.WithClockShifts(0, d, -d))
		}
		tt.cluster = zktest.Start(t, append(opts, tt.operatorOptions()...)...)
		if cfg.sw.loss {
			tt.loss = zktest.NewLoss(t)
		}
	}
	tt.obs = tortureObserver(t, tt.cluster.Addrs())
	if _, err := tt.obs.Create(cfg.root, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("creating %s: %v", cfg.root, err)
	}
	for i := range cfg.clients {
		s := &slot{idx: i, proxy: zktest.NewProxy(t, tt.cluster.Addrs()...), ready: make(chan struct{}), retired: map[*zklock.Client]bool{},
			chroot: cfg.sw.chrooted[i], asked: cfg.sw.asked[i], maxHold: cfg.sw.maxHold[i]}
		c, err := tt.connect(s)
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		s.cur = c
		close(s.ready)
		tt.slots = append(tt.slots, s)
	}
	tt.child = tt.startChild()
	tt.makeFences()
	tt.makeSentinel()
	tt.startPeer()
	tt.startObservers()
	tt.startService()
	tt.startExec()
	tt.startFence()
	return tt
}

// tortureObserver connects straight to the servers, with a session long
// enough to outlive a restart of all three.
func tortureObserver(t *testing.T, addrs []string) *zk.Conn {
	conn, events, err := zk.Connect(addrs, 20*time.Second, zk.WithLogger(log.New(io.Discard, "", 0)), zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	deadline := time.After(30 * time.Second)
	for conn.State() != zk.StateHasSession {
		select {
		case <-events:
		case <-deadline:
			t.Fatal("observer: no session")
		}
	}
	go func() {
		for range events {
		}
	}()
	return conn
}

func (tt *torture) connect(s *slot) (*zklock.Client, error) {
	ctx, cancel := context.WithTimeout(tt.ctx, time.Minute)
	defer cancel()
	addr, opts := s.proxy.Addr(), tortureOptions(tt.cfg.root, s.asked, s.slow.handle)
	if s.chroot {
		// Under the chroot the client names every path below the
		// torture's root; its cleaner may remove what lies below "/".
		addr, opts = addr+tt.cfg.root, tortureOptions("/", s.asked, s.slow.handle)
	}
	if s.maxHold > 0 {
		opts = append(opts, zklock.WithMaxHold(s.maxHold))
	}
	if tt.cfg.sw.maxhold {
		opts = append(opts, zklock.WithBreakOverdue()) // waiters break holders stalled past their limit
	}
	return zklock.Connect(ctx, []string{addr}, opts...)
}

// run starts the work and the faults and lets them go for the duration.
func (tt *torture) run() {
	work, stopWork := context.WithCancel(tt.ctx)
	faults, stopFaults := context.WithCancel(tt.ctx)
	tt.bg.Add(2)
	go tt.schedule(faults)
	go tt.sampleCPU(faults)
	for _, s := range tt.slots {
		for w := range tortureWorkers {
			tt.workers.Add(1)
			go tt.worker(work, s, w)
		}
	}
	tt.startServiceCallers(work)
	tt.startExecRunners(work)
	tt.progress(tt.cfg.duration)
	stopFaults()
	tt.bg.Wait()
	tt.heal()
	tt.probeLiveness()
	tt.probeService()
	time.Sleep(settleTime)
	tt.stoppedAt.Store(int64(monoNow()))
	stopWork()
	if !waitTimeout(&tt.workers, time.Minute) {
		tt.lg.violate("workers still busy a minute after the stop: a call hangs\n%s", allStacks())
		tt.cancel()
		tt.workers.Wait()
	}
	tt.checkObservers()
}

// progress waits d, logging a line a minute for long runs.
func (tt *torture) progress(d time.Duration) {
	end := time.Now().Add(d)
	for left := d; left > 0; left = time.Until(end) {
		time.Sleep(min(left, time.Minute))
		if time.Until(end) > 0 {
			tt.t.Logf("torture: %v to go: %d grants, %d violations so far", time.Until(end).Round(time.Second), tt.lg.granted(), tt.lg.violationCount())
		}
	}
}

// heal waits for the faults under way and undoes whatever they left.
func (tt *torture) heal() {
	tt.faults.Wait()
	for _, s := range tt.slots {
		s.proxy.Resume()
		s.proxy.Block(false)
		s.cutBeforeRelease.Store(false)
		s.slow.until.Store(0)
	}
	if tt.svc != nil {
		tt.svc.proxy.Resume()
	}
	if tt.exec != nil {
		for _, r := range tt.exec.runners {
			r.proxy.Resume()
		}
	}
	if tt.cluster.External() {
		return
	}
	for _, i := range tt.cluster.Partitioned() {
		_ = tt.cluster.Heal(i)
	}
	ctx, cancel := context.WithTimeout(tt.ctx, 2*time.Minute)
	defer cancel()
	if err := tt.cluster.WaitHealthy(ctx); err != nil {
		tt.t.Errorf("harness: the ensemble did not recover after the faults: %v", err)
	}
}

// probeLiveness: once the faults are healed, every client can take an
// uncontended lock of its own at once. A client that missed the event of its
// new session (lesson 18) would wait forever.
func (tt *torture) probeLiveness() {
	var wg sync.WaitGroup
	for _, s := range tt.slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(tt.ctx, 30*time.Second)
			defer cancel()
			m, err := s.current().NewMutex(s.local(tt, fmt.Sprintf("%s/probe/c%d", tt.cfg.root, s.idx)))
			// A loss is no stuck client: on a loaded machine a short session's
			// word can grow old between the grant and the release (a
			// fresh-clone run lost three in a row, its servers healthy again
			// only 22 s after a restart). Losses for the whole 30 s are.
			for err == nil {
				var l *zklock.Lease
				if l, err = m.Acquire(ctx); err == nil {
					err = l.Release(ctx)
				}
				if errors.Is(err, zklock.ErrLockLost) && ctx.Err() == nil {
					tt.counts.add("probe.lost")
					err = nil
					continue
				}
				break
			}
			if err != nil {
				tt.lg.violate("client %d cannot take an uncontended lock after the faults healed: %v", s.idx, err)
			}
		}()
	}
	wg.Wait()
}

// finish stops the child, closes every client, and checks what is left.
func (tt *torture) finish() {
	if tt.child != nil {
		tt.child.stop(tt.t)
	}
	var wg sync.WaitGroup
	for _, s := range tt.slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tt.closeClient(s.current())
		}()
	}
	wg.Wait()
	if !waitTimeout(&tt.watchers, 30*time.Second) {
		tt.lg.violate("a lease's Done never closed after its client was closed")
	}
	time.Sleep(tortureCleanupDelay)
	tt.stopPeer()
	tt.stopService()
	tt.stopExec()
	tt.stopFence()
	tt.checkTree()
	tt.jobs.check(tt)
	tt.checkSentinel()
	tt.removeFences()
	tt.removeSentinel()
	_ = tt.obs.Delete(tt.cfg.root, -1)
	tt.verdict = tt.lg.check()
	tt.cancel()
}

func (tt *torture) closeClient(c *zklock.Client) {
	start := monoNow()
	c.Close()
	if took := time.Duration(monoNow() - start); took > closeBound {
		tt.lg.violate("Close took %v (bound %v)", took.Round(time.Millisecond), closeBound)
	}
}

func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

func allStacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func randDur(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
}

// between scales u in [0, 1) to [lo, hi).
func between(u float64, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(u*float64(hi-lo))
}

// counters are the run's tallies by name ("grant.mutex", "fault.cut", ...).
type counters struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *counters) add(key string) { c.addN(key, 1) }

func (c *counters) addN(key string, n int) {
	c.mu.Lock()
	c.m[key] += n
	c.mu.Unlock()
}

func (c *counters) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[key]
}

// withPrefix returns the tallies whose name starts with prefix, sorted.
func (c *counters) withPrefix(prefix string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for k, n := range c.m {
		if strings.HasPrefix(k, prefix) {
			out = append(out, fmt.Sprintf("%s=%d", strings.TrimPrefix(k, prefix), n))
		}
	}
	sort.Strings(out)
	return out
}

// ---- clients and workers ----

// slot is one in-process client position: a proxy of its own and the client
// behind it, which the close_waiting fault replaces with a fresh one.
type slot struct {
	idx   int
	proxy *zktest.Proxy
	slow  slowHandler

	mu      sync.Mutex
	cur     *zklock.Client
	ready   chan struct{} // closed while cur is usable
	retired map[*zklock.Client]bool

	waiting          atomic.Int32 // workers inside an Acquire or Do
	holding          atomic.Int32 // workers holding a lease
	longHolds        atomic.Int32 // workers in a hold of a second or more
	cutBeforeRelease atomic.Bool  // the next Release is preceded by a Cut
	releases         atomic.Int64 // Releases so far: every other one has no deadline
	busy             atomic.Bool  // a proxy or close fault is under way

	chroot bool          // the client connects under the torture's root (swarm)
	asked  time.Duration // the session timeout it asks for (swarm)
	// maxHold is the client's WithMaxHold, 0 for none (swarm)
	maxHold time.Duration
}

// local is p (a path of the whole tree) as the slot's client names it.
func (s *slot) local(tt *torture, p string) string {
	if s.chroot {
		return strings.TrimPrefix(p, tt.cfg.root)
	}
	return p
}

// global is p (a path as the slot's client names it) in the whole tree.
func (s *slot) global(tt *torture, p string) string {
	if s.chroot && p != "" {
		return tt.cfg.root + p
	}
	return p
}

// client returns the usable client, waiting while it is being replaced; nil
// when ctx ends first.
func (s *slot) client(ctx context.Context) *zklock.Client {
	s.mu.Lock()
	c, ready := s.cur, s.ready
	s.mu.Unlock()
	select {
	case <-ready:
		return c
	case <-ctx.Done():
		return nil
	}
}

func (s *slot) current() *zklock.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// isRetired reports a client that close_waiting closed (or is closing).
func (s *slot) isRetired(c *zklock.Client) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.retired[c]
}

// slowHandler is the clients' event handler: while armed it sleeps on every
// event, as careless user code on the event goroutine would.
type slowHandler struct {
	until atomic.Int64 // mono
	delay atomic.Int64 // ns
}

func (h *slowHandler) handle(zk.Event) {
	if monoNow() < mono(h.until.Load()) {
		time.Sleep(time.Duration(h.delay.Load()))
	}
}

func (tt *torture) worker(ctx context.Context, s *slot, w int) {
	defer tt.workers.Done()
	rng := rand.New(rand.NewPCG(tt.cfg.seed, uint64(1+s.idx*tortureWorkers+w)))
	for ctx.Err() == nil {
		c := s.client(ctx)
		if c == nil {
			return
		}
		o := &op{tt: tt, s: s, c: c, who: fmt.Sprintf("c%d/w%d", s.idx, w), path: tt.cfg.paths[rng.IntN(len(tt.cfg.paths))], rng: rng}
		switch n := rng.IntN(100); {
		case n < 30:
			o.plain(ctx, "mutex")
		case n < 42:
			o.reentrant(ctx)
		case n < 54:
			o.plain(ctx, "try")
		case n < 60:
			o.do(ctx)
		case n < 64:
			o.elect(ctx)
		case n < 72:
			o.singleton(ctx)
		case n < 84:
			o.rw(ctx, n < 80)
		case n < 92:
			o.semaphore(ctx)
		case n < 96:
			o.multi(ctx)
		default:
			o.job(ctx)
		}
		sleepCtx(ctx, randDur(rng, 0, 30*time.Millisecond))
	}
}

// op is one operation of a worker on one path.
type op struct {
	tt   *torture
	s    *slot
	c    *zklock.Client
	who  string
	path string
	rng  *rand.Rand
}

// lp is p as the op's client names it; gp is a path the client named, in
// the whole tree (the ledger's paths).
func (o *op) lp(p string) string { return o.s.local(o.tt, p) }
func (o *op) gp(p string) string { return o.s.global(o.tt, p) }

var ownerSeq atomic.Int64

// ownerName is a unique explicit owner, which the lock node records: a hand
// deletion of a Do's node is traced to its lease through it.
func (o *op) ownerName(kind string) string {
	return fmt.Sprintf("%s-%s-%d", o.who, kind, ownerSeq.Add(1))
}

// deadline gives an Acquire its context: mostly a deadline of 100ms..5s,
// sometimes none (the run's end stops it). dl is 0 without a deadline.
func (o *op) deadline(ctx context.Context) (context.Context, context.CancelFunc, mono) {
	if o.rng.IntN(10) == 0 {
		c, cancel := context.WithCancel(ctx)
		return c, cancel, 0
	}
	d := randDur(o.rng, 100*time.Millisecond, 5*time.Second)
	dl := monoNow() + mono(d)
	c, cancel := context.WithTimeout(ctx, d)
	return c, cancel, dl
}

// holdTime: mostly short, sometimes long enough to outlive a partition.
func (o *op) holdTime() time.Duration {
	switch n := o.rng.IntN(1000); {
	case n < 800:
		return randDur(o.rng, 0, 5*time.Millisecond)
	case n < 975:
		return randDur(o.rng, 5*time.Millisecond, 150*time.Millisecond)
	default:
		return randDur(o.rng, time.Second, 4*time.Second)
	}
}

// acquire calls fn and checks when it returned against the deadline dl.
func (o *op) acquire(ctx context.Context, dl mono, what string, fn func(context.Context) (*zklock.Lease, error)) (*zklock.Lease, mono, error) {
	o.s.waiting.Add(1)
	l, err := fn(ctx)
	at := monoNow()
	o.s.waiting.Add(-1)
	o.tt.returned(o.who+" "+what, dl, at, err)
	o.tt.classify(o.who+" "+what, dl, at, err)
	o.tt.acquireError(what, err)
	return l, at, err
}

// returned records how far past its deadline (or the run's stop, for a call
// without one) a call returned. Calls ended by Close are not timed.
func (tt *torture) returned(what string, dl, at mono, err error) {
	if errors.Is(err, zklock.ErrClosed) {
		return
	}
	if stop := mono(tt.stoppedAt.Load()); stop != 0 && (dl == 0 || stop < dl) {
		dl = stop
	}
	if dl == 0 || at <= dl {
		return
	}
	tt.lg.overshoot(what, time.Duration(at-dl))
}

// acquireError tallies failures that are neither timeouts nor Close: the
// library may return them (after removing its node), but they are worth a look.
func (tt *torture) acquireError(what string, err error) {
	switch {
	case err == nil, errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, zklock.ErrClosed):
	case errors.Is(err, zklock.ErrLocked):
		tt.counts.add("try.locked")
	case errors.Is(err, zklock.ErrLockLost):
		tt.counts.add("lost_in_fn." + what)
	default:
		msg := err.Error()
		if len(msg) > 100 {
			msg = msg[:100]
		}
		tt.counts.add("acquire_error." + what + ": " + msg)
	}
}

// syncLimitTicks is the servers' syncLimit for the configuration sw.
func syncLimitTicks(sw swarmConfig) int {
	if sw.pause {
		return int(tortureSyncLimit / tortureTick)
	}
	return 5
}

// granted puts a lease that Acquire just returned into the ledger.
func (o *op) granted(kind string, l *zklock.Lease, at mono, hold time.Duration, owner string) *leaseRec {
	r := &leaseRec{path: o.path, node: o.gp(l.Node()), owner: owner, holder: o.who + " " + kind, start: at, planned: at + mono(hold), done: l.Done()}
	o.tt.lg.grant(r)
	o.tt.watchEnd(r, l.Done(), l.Err)
	o.tt.watchFalseLoss(o.who, o.c, l)
	o.tt.lg.setToken(r, tokenOf(l))
	o.tt.counts.add("grant." + kind)
	return r
}

// watchFalseLoss counts a lease of c that the loss rule ended while its
// session lived on (nobody deleted its node, the session did not expire):
// the price of trusting only the leader's proven word (issue 47). It is
// judged two session timeouts after the end, when an expired session has
// been replaced; a lease granted already ended counts as born_ended.
func (tt *torture) watchFalseLoss(who string, c *zklock.Client, l *zklock.Lease) {
	conn := c.Conn()
	session := conn.SessionID()
	select {
	case <-l.Done():
		tt.counts.add("grant.born_ended")
	default:
	}
	tt.watchers.Add(1)
	go func() {
		defer tt.watchers.Done()
		select {
		case <-l.Done():
		case <-tt.ctx.Done():
			return
		}
		if err := l.Err(); !errors.Is(err, zklock.ErrLockLost) || !strings.Contains(err.Error(), "no word from ZooKeeper's leader") {
			return
		}
		t := time.NewTimer(2 * c.SessionTimeout())
		defer t.Stop()
		select {
		case <-t.C:
		case <-tt.ctx.Done():
		}
		if conn.SessionID() == session && conn.State() == zk.StateHasSession {
			tt.counts.add("false_losses")
			tt.lg.note(fmt.Sprintf("false loss: %s's lease of session 0x%x, ended by the loss rule %v ago; the session lives", who, session, 2*c.SessionTimeout()))
		}
	}()
}

// watchEnd stamps the lease's end when done closes.
func (tt *torture) watchEnd(r *leaseRec, done <-chan struct{}, why func() error) {
	tt.watchers.Add(1)
	go func() {
		defer tt.watchers.Done()
		<-done
		err := why()
		tt.lg.ended(r, monoNow(), err)
		if errors.Is(err, zklock.ErrHoldLimit) {
			tt.counts.add("maxhold.ended")
		}
	}()
}

// hold keeps a lease for d, or until it ends or the run stops.
func (o *op) hold(ctx context.Context, done <-chan struct{}, d time.Duration) {
	o.s.holding.Add(1)
	defer o.s.holding.Add(-1)
	if d >= time.Second {
		o.s.longHolds.Add(1)
		defer o.s.longHolds.Add(-1)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-done:
	case <-ctx.Done():
	}
}

// plain is a Mutex Acquire or TryAcquire, a hold, and a Release.
func (o *op) plain(ctx context.Context, kind string) {
	m, err := o.c.NewMutex(o.lp(o.path))
	if err != nil {
		o.tt.lg.violate("NewMutex(%s): %v", o.path, err)
		return
	}
	fn := m.Acquire
	if kind == "try" {
		fn = m.TryAcquire
		o.tt.counts.add("try.attempts")
	}
	o.cycle(ctx, kind, fn, func(*leaseRec) {})
}

// cycle acquires with fn under a drawn deadline, records the lease (mark
// says what kind of holder it is), holds it and releases it.
func (o *op) cycle(ctx context.Context, kind string, fn func(context.Context) (*zklock.Lease, error), mark func(*leaseRec)) {
	actx, cancel, dl := o.deadline(ctx)
	defer cancel()
	hold := o.holdTime()
	l, at, err := o.acquire(actx, dl, kind, fn)
	if err != nil {
		return
	}
	r := o.granted(kind, l, at, hold, "")
	mark(r)
	if zklock.ListWatched(l) {
		o.tt.counts.add("grant.listwatched") // held at once, watched through its listing
	}
	if o.rng.IntN(8) == 0 {
		o.escape(l)
	}
	o.hold(ctx, l.Done(), hold)
	o.release(r, l.Release)
}

// rw takes the RWMutex as a reader or a writer, holds and releases.
func (o *op) rw(ctx context.Context, read bool) {
	o.path = o.tt.cfg.rwPath
	rw, err := o.c.NewRWMutex(o.lp(o.path))
	if err != nil {
		o.tt.lg.violate("NewRWMutex(%s): %v", o.path, err)
		return
	}
	kind, fn := "write", rw.AcquireWrite
	if !read && o.rng.IntN(2) == 0 {
		o.downgrade(ctx, rw) // half the writes end in a downgrade to a read lease
		return
	}
	if read {
		kind, fn = "read", rw.AcquireRead
	}
	o.cycle(ctx, kind, fn, func(r *leaseRec) { r.shared = read })
}

// semaphore takes one of the Semaphore's leases, holds and releases.
func (o *op) semaphore(ctx context.Context) {
	o.path = o.tt.cfg.semPath
	s, err := o.c.NewSemaphore(o.lp(o.path), tortureSemLimit)
	if err != nil {
		o.tt.lg.violate("NewSemaphore(%s): %v", o.path, err)
		return
	}
	if o.rng.IntN(4) == 0 {
		o.permits(ctx, s) // a quarter take every permit at once
		return
	}
	o.cycle(ctx, "semaphore", s.Acquire, func(r *leaseRec) { r.limit = tortureSemLimit })
}

// multi takes two of the mutex paths, named in a random order, as one
// MultiLock lease; each part is a holder of its path in the ledger.
func (o *op) multi(ctx context.Context) {
	i := o.rng.IntN(len(o.tt.cfg.paths))
	j := (i + 1 + o.rng.IntN(len(o.tt.cfg.paths)-1)) % len(o.tt.cfg.paths)
	ml, err := o.c.NewMultiLock(o.lp(o.tt.cfg.paths[i]), o.lp(o.tt.cfg.paths[j]))
	if err != nil {
		o.tt.lg.violate("NewMultiLock: %v", err)
		return
	}
	actx, cancel, dl := o.deadline(ctx)
	defer cancel()
	hold := o.holdTime()
	l, at, err := o.acquire(actx, dl, "multi", ml.Acquire)
	if err != nil {
		return
	}
	var recs []*leaseRec
	for k, part := range l.Parts() {
		o.path = o.gp(ml.Paths()[k])
		recs = append(recs, o.granted("multi", part, at, hold, ""))
	}
	o.hold(ctx, l.Done(), hold)
	o.tt.lg.ended(recs[1], monoNow(), zklock.ErrReleased)
	o.path = o.gp(ml.Paths()[0])
	o.release(recs[0], l.Release)
}

// reentrant takes a ReentrantMutex twice and releases it twice; the owner is
// the goroutine or, half the time, an explicit one, whose last Release then
// sometimes comes from another goroutine.
func (o *op) reentrant(ctx context.Context) {
	rm, err := o.c.NewReentrantMutex(o.lp(o.path))
	if err != nil {
		o.tt.lg.violate("NewReentrantMutex(%s): %v", o.path, err)
		return
	}
	owner, elsewhere := "", false
	own := func(ctx context.Context) context.Context { return ctx }
	if o.rng.IntN(2) == 0 {
		owner, elsewhere = o.ownerName("re"), o.rng.IntN(2) == 0
		own = func(ctx context.Context) context.Context { return zklock.ContextWithOwner(ctx, owner) }
	}
	actx, cancel, dl := o.deadline(ctx)
	defer cancel()
	hold := o.holdTime()
	l, at, err := o.acquire(own(actx), dl, "reentrant", rm.Acquire)
	if err != nil {
		return
	}
	r := o.granted("reentrant", l, at, hold, owner)
	nested := o.reenter(rm, own(context.Background()), l)
	o.hold(ctx, l.Done(), hold)
	if nested {
		// An inner Release of a lease that has ended reports why (like
		// Lease.Release); of a held one it must succeed.
		err := rm.Release(own(context.Background()))
		ended := isClosed(l.Done()) && (errors.Is(err, zklock.ErrLockLost) || errors.Is(err, zklock.ErrHoldLimit) || errors.Is(err, zklock.ErrClosed))
		if err != nil && !ended {
			o.tt.lg.violate("%s: the inner Release of a re-entered lock on %s failed: %v", o.who, o.path, err)
		}
	}
	release := func(ctx context.Context) error { return rm.Release(own(ctx)) }
	if !elsewhere {
		o.release(r, release)
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		o.release(r, release)
	}()
	<-done
}

// reenter takes the held lock again; it reports whether the hold count grew.
func (o *op) reenter(rm *zklock.ReentrantMutex, ctx context.Context, l *zklock.Lease) bool {
	again, err := rm.Acquire(ctx)
	switch {
	case err == nil && again != l:
		o.tt.lg.violate("%s: re-entering %s returned another lease (%s, not %s)", o.who, o.path, again.Node(), l.Node())
		return true
	case err == nil:
		return true
	case errors.Is(err, zklock.ErrLockLost), errors.Is(err, zklock.ErrClosed), errors.Is(err, zklock.ErrHoldLimit):
		return false // the hold ended first (with "maxhold", by its limit: a 1-min run met 284 ms passing before a re-entry)
	default:
		o.tt.lg.violate("%s: re-entering a held lock on %s failed: %v", o.who, o.path, err)
		return false
	}
}

// cutIfArmed cuts the connection before a release if that fault is armed
// and no other fault is under way on the client (revokeCut's bound counts on
// one fault at a time); a busy client keeps it armed for a later release.
func (o *op) cutIfArmed(r *leaseRec) {
	if !o.s.cutBeforeRelease.Load() || !o.s.busy.CompareAndSwap(false, true) {
		return
	}
	defer o.s.busy.Store(false)
	if o.s.cutBeforeRelease.CompareAndSwap(true, false) {
		o.s.proxy.Cut()
		o.tt.began(fCutBeforeRelease, "c%d before releasing %s", o.s.idx, r.node)
	}
}

// release gives a lease up, after a cut of the connection if that fault is
// armed. Release may only return nil, the loss, ctx's error, or ErrNotHeld
// after Close released it: anything else means the library gave up on a
// delete it should have retried, and its node may block the queue.
func (o *op) release(r *leaseRec, fn func(context.Context) error) {
	o.cutIfArmed(r)
	o.tt.lg.ended(r, monoNow(), zklock.ErrReleased)
	for range 3 {
		// Every other Release has no deadline of its own: the time contract
		// still bounds it, by the loss deadline (80 % of the session timeout
		// after the server last answered) when ZooKeeper does not answer.
		ctx, cancel, bound, how := context.Background(), context.CancelFunc(func() {}), tortureSession, "no deadline"
		if o.s.releases.Add(1)%2 == 0 {
			ctx, cancel = context.WithTimeout(context.Background(), 3*time.Second)
			bound, how = 3*time.Second, "a 3s deadline"
		}
		start := monoNow()
		err := fn(ctx)
		took := time.Duration(monoNow() - start)
		cancel()
		if took > bound+overshootSlack {
			o.tt.lg.violate("%s: Release on %s took %v with %s", o.who, o.path, took.Round(time.Millisecond), how)
		}
		switch {
		case err == nil, errors.Is(err, zklock.ErrLockLost), errors.Is(err, zklock.ErrHoldLimit), errors.Is(err, zklock.ErrClosed):
			return
		case errors.Is(err, context.DeadlineExceeded):
			o.tt.counts.add("release.timeout")
			return
		case errors.Is(err, zklock.ErrNotHeld) && o.s.isRetired(o.c):
			return // Close released it first
		}
		o.tt.lg.violate("%s: Release of %s (node %s) failed: %v", o.who, o.path, r.node, err)
		if errors.Is(err, zklock.ErrNotHeld) || errors.Is(err, zklock.ErrNotOwner) {
			return
		}
	}
}

// do runs Mutex.Do; the lease runs from fn's start to its return or the
// cancellation of its context.
func (o *op) do(ctx context.Context) {
	m, err := o.c.NewMutex(o.lp(o.path))
	if err != nil {
		o.tt.lg.violate("NewMutex(%s): %v", o.path, err)
		return
	}
	owner := o.ownerName("do")
	actx, cancel, dl := o.deadline(ctx)
	defer cancel()
	hold := o.holdTime()
	waiting := true
	o.s.waiting.Add(1)
	err = m.Do(zklock.ContextWithOwner(actx, owner), func(fctx context.Context) error {
		o.s.waiting.Add(-1)
		waiting = false
		at := monoNow()
		r := &leaseRec{path: o.path, owner: owner, holder: o.who + " do", start: at, planned: at + mono(hold), done: fctx.Done()}
		o.tt.lg.grant(r)
		o.tt.watchEnd(r, fctx.Done(), func() error { return context.Cause(fctx) })
		o.tt.watchFalseLoss(o.who, o.c, zklock.LeaseOf(fctx))
		o.tt.counts.add("grant.do")
		o.hold(fctx, fctx.Done(), hold)
		o.tt.lg.ended(r, monoNow(), errFnReturned)
		return nil
	})
	if waiting {
		o.s.waiting.Add(-1)
	}
	o.tt.returned(o.who+" do", dl, monoNow(), err)
	o.tt.acquireError("do", err)
}

// singleton runs RunSingleton for 1..8s; each election's fn holds a while and
// returns, which ends the run early.
func (o *op) singleton(ctx context.Context) {
	d := randDur(o.rng, time.Second, 8*time.Second)
	dl := monoNow() + mono(d)
	sctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var elected *zklock.Lease
	m, err := o.c.NewMutex(o.lp(o.path))
	if err != nil {
		o.tt.t.Errorf("%s: %v", o.who, err)
		return
	}
	err = m.RunSingleton(sctx, func(fctx context.Context) error {
		hold := o.holdTime()
		at := monoNow()
		r := &leaseRec{path: o.path, node: o.gp(elected.Node()), holder: o.who + " singleton", start: at, planned: at + mono(hold), done: fctx.Done()}
		o.tt.lg.grant(r)
		o.tt.watchEnd(r, fctx.Done(), func() error { return context.Cause(fctx) })
		o.tt.watchFalseLoss(o.who, o.c, elected)
		o.tt.lg.setToken(r, tokenOf(elected))
		o.tt.counts.add("grant.singleton")
		o.hold(fctx, fctx.Done(), hold)
		o.tt.lg.ended(r, monoNow(), errFnReturned)
		return nil
	}, zklock.OnElected(func(l *zklock.Lease) { elected = l }), zklock.OnLost(func(error) { o.tt.counts.add("singleton.lost") }))
	o.tt.returned(o.who+" singleton", dl, monoNow(), err)
	o.tt.acquireError("singleton", err)
}

// checkTree: once every client has closed, nothing is left under the root:
// no lock node, and no empty lock path or ancestor.
func (tt *torture) checkTree() {
	deadline := time.Now().Add(5 * time.Second)
	for {
		left, err := tt.descendants(tt.cfg.root)
		records := slices.DeleteFunc(slices.Clone(left), func(p string) bool { return !strings.HasSuffix(p, jobRecordSuffix) })
		left = slices.DeleteFunc(left, func(p string) bool {
			return p == tt.fenceRoot() || strings.HasPrefix(p, tt.fenceRoot()+"/") || keptForJob(p, records)
		})
		if err == nil && len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			tt.lg.violate("left under %s after every client closed: %v (err %v)", tt.cfg.root, left, err)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (tt *torture) descendants(p string) ([]string, error) {
	children, _, err := tt.obs.Children(p)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range children {
		out = append(out, p+"/"+c)
		below, err := tt.descendants(p + "/" + c)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return nil, err
		}
		out = append(out, below...)
	}
	return out, nil
}

// checkGoroutines: with the clients, the child, the proxies, the observer and
// the servers gone, only the goroutines of before the run remain.
func (tt *torture) checkGoroutines(baseline goleak.Option) {
	for _, s := range tt.slots {
		_ = s.proxy.Close()
	}
	if tt.child != nil {
		_ = tt.child.proxy.Close()
	}
	tt.obs.Close()
	if !tt.cluster.External() {
		for _, s := range tt.cluster.Servers() {
			_ = s.Kill() // its log and wait goroutines end with it
		}
	}
	// The ensemble's link proxies (WithPartitions) live as long as the
	// cluster, which the test's cleanup stops after this check; with the
	// servers killed, only their listeners are left.
	// A connection to a link proxy accepted as the servers died redials
	// them until the cluster's cleanup (every other proxy was closed
	// above, and Close waits for its dials).
	linkProxies := goleak.IgnoreAnyFunction("github.com/zklock/zklock/zktest.(*Proxy).acceptLoop")
	linkDials := goleak.IgnoreAnyFunction("github.com/zklock/zklock/zktest.(*Proxy).dialTarget")
	if err := goleak.Find(baseline, linkProxies, linkDials); err != nil {
		tt.verdict.violations = append(tt.verdict.violations, fmt.Sprintf("goroutines leaked: %v", err))
	}
}

// report prints the summary line and fails the test on any violation.
func (tt *torture) report() {
	v := tt.verdict
	var faults []string
	skipped := 0
	for k := range numFaultKinds {
		faults = append(faults, fmt.Sprintf("%s=%d", k, tt.counts.get("fault."+k.String())))
		skipped += tt.counts.get("skipped." + k.String())
	}
	margin := "none"
	if v.margins > 0 {
		margin = v.minMargin.Round(time.Millisecond).String()
	}
	line := fmt.Sprintf("torture: seed=%d duration=%v clients=%d %v acquisitions=%d mutex=%d listwatched=%d reentrant=%d tryacquire=%d/%d do=%d singleton=%d read=%d write=%d semaphore=%d multi=%d child=%d job=%d/%d svc_stream=%d svc_lease=%d exec=%d/%d "+
		"elect=%d proclaimed=%d guarded{landed=%d refused_lost=%d refused_version=%d unknown=%d} faults{%s} skipped=%d losses=%d false_losses=%d born_ended=%d worst_overshoot=%v overshoot_bound=%v min_loss_to_grant_margin=%s fenced_writes=%d child_writes=%d max_cpu_per_s=%.2f max_cpu_per_s_cut_off=%.2f violations=%d",
		tt.cfg.seed, tt.cfg.duration, tt.cfg.clients, tt.cfg.sw.flags(), v.leases, tt.counts.get("grant.mutex"), tt.counts.get("grant.listwatched"), tt.counts.get("grant.reentrant"),
		tt.counts.get("grant.try"), tt.counts.get("try.attempts"), tt.counts.get("grant.do"), tt.counts.get("grant.singleton"),
		tt.counts.get("grant.read"), tt.counts.get("grant.write"), tt.counts.get("grant.semaphore"), tt.counts.get("grant.multi")/2, tt.counts.get("grant.child"),
		tt.counts.get("grant.job"), tt.counts.get("grant.job")+tt.counts.get("job.ran_already")+tt.counts.get("job.busy"),
		tt.counts.get("grant.svc_stream"), tt.counts.get("grant.svc_lease"), tt.counts.get("grant.exec"), tt.counts.get("exec.runs"),
		tt.counts.get("grant.elect"), tt.counts.get("elect.proclaimed"), tt.counts.get("guarded.landed"), tt.counts.get("guarded.refused_lost"),
		tt.counts.get("guarded.refused_version"), tt.counts.get("guarded.unknown"),
		strings.Join(faults, " "), skipped, v.losses, tt.counts.get("false_losses"), tt.counts.get("grant.born_ended"), v.worst.Round(time.Millisecond), tt.lg.bound, margin, v.fenced, tt.counts.get("child.writes"),
		tt.cpu.max, tt.cpu.maxCut, len(v.violations))
	fmt.Println(line)
	tt.t.Log(line)
	if v.marginWhat != "" {
		tt.t.Logf("smallest loss-to-grant margin: %s", v.marginWhat)
	}
	if v.worstWhat != "" {
		tt.t.Logf("worst overshoot: %s", v.worstWhat)
	}
	tt.t.Logf("skipped faults (target busy or not found): %s", strings.Join(tt.counts.withPrefix("skipped."), " "))
	var sw []string
	for _, p := range []string{"grant.peer_", "peer.", "grant.revoke", "revoke.", "chroot.", "outage.", "maxhold.", "job.", "grant.downgrade", "downgrade.", "grant.permits", "svc.", "exec.", "fence.", "rollover.", "loss."} {
		for _, e := range tt.counts.withPrefix(p) {
			sw = append(sw, p+e)
		}
	}
	tt.t.Logf("swarm: %v; tallies: %s", tt.cfg.sw, strings.Join(sw, " "))
	if tt.svc != nil {
		tt.t.Logf("service: worst overshoot of a wait's timeout %v (%s; bound %v)",
			tt.svc.worst.Round(time.Millisecond), tt.svc.worstWhat, svcOvershootBound)
	}
	if other := append(tt.counts.withPrefix("release."), append(tt.counts.withPrefix("singleton."), tt.counts.withPrefix("lost_in_fn.")...)...); len(other) > 0 {
		tt.t.Logf("other tallies: %s", strings.Join(other, " "))
	}
	for _, e := range tt.counts.withPrefix("acquire_error.") {
		tt.t.Logf("acquire error: %s", e)
	}
	for i, e := range v.violations {
		if i == 30 {
			tt.t.Errorf("... and %d more", len(v.violations)-i)
			break
		}
		tt.t.Errorf("violation: %s", e)
	}
	if len(v.violations) > 0 {
		tt.saveTimeline()
		tt.t.Errorf("replay: go test -race -run '^TestTorture$' . -args -torture.seed=%d -torture.clients=%d -torture.duration=%v (draws %v again; -torture.swarm=%s forces it)", tt.cfg.seed, tt.cfg.clients, tt.cfg.duration, tt.cfg.sw, tt.cfg.sw.flags())
	}
}

// saveTimeline writes the fault timeline of a failed run next to the test's
// temporary files, where it outlives the test, and logs where.
func (tt *torture) saveTimeline() {
	name := filepath.Join(os.TempDir(), fmt.Sprintf("zklock-torture-%d-%d.faults", tt.cfg.seed, os.Getpid()))
	text := strings.Join(tt.verdict.timeline, "\n") + "\n"
	if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
		tt.t.Logf("writing the fault timeline: %v", err)
		return
	}
	tt.t.Logf("fault timeline (%d lines, times since the start): %s", len(tt.verdict.timeline), name)
}
