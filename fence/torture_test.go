//go:build linux

package fence_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zklock/zklock/fence"
)

// The fence torture: worker processes take one zklock mutex in turn and,
// while they hold it, write under their token to a fenced register in a real
// PostgreSQL: check the fence, read the register, write it plus one, log the
// write, commit. The test pauses holders (SIGSTOP) now shorter than their
// session, now past it, and resumes them; a resumed worker goes on with the
// writes it meant to make, as a thawed process does, without asking its
// lease. Every write of a holder whose lock has passed on must be refused.
// At the end: the committed log (in register order) must never see a token
// go down (stale_accepted, a violation), and the writes as the workers saw
// them must be linearizable against a fenced register (porcupine).
var (
	tortureDuration = flag.Duration("torture.duration", 15*time.Second, "how long the fence torture runs")
	tortureWorkers  = flag.Int("torture.workers", 4, "worker processes of the fence torture")
	tortureSeed     = flag.Uint64("torture.seed", 0, "the fence torture's seed (0: drawn)")
)

const (
	tortureSession = 2 * time.Second
	tortureLock    = "/fence-torture/lock"
	tortureFence   = "torture"
)

// tortureEvent is a line a worker prints.
type tortureEvent struct {
	Worker int    `json:"w"`
	Ev     string `json:"ev"` // held, write, released
	Token  int64  `json:"token,omitempty"`
	Call   int64  `json:"call,omitempty"` // a write's start and end, Unix ns
	Ret    int64  `json:"ret,omitempty"`
	Result string `json:"result,omitempty"` // ok, stale, unknown
	V      int64  `json:"v,omitempty"`      // the register's value it wrote
	Err    string `json:"err,omitempty"`
}

func TestFenceTorture(t *testing.T) {
	if os.Getenv("FENCE_TORTURE_WORKER") != "" {
		tortureWorker(t)
		return
	}
	seed := *tortureSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	zk := sharedZooKeeper(t)
	pg := server(t, "postgres")
	db := openOn(t, "postgres", "pgx", "")
	if err := fence.New(db, fence.Postgres).Install(context.Background()); err != nil {
		t.Fatal(err)
	}
	prepareTorture(t, db)
	tr := &tortureRun{t: t, rng: rand.New(rand.NewPCG(seed, 1))}
	for i := range *tortureWorkers {
		tr.start(i, zk.Addrs(), pg.DSN)
	}
	tr.faults(*tortureDuration)
	tr.stopAll()
	tr.check(db, seed)
}

func prepareTorture(t *testing.T, db *sql.DB) {
	t.Helper()
	for _, q := range []string{
		`DROP TABLE IF EXISTS torture_register, torture_log`,
		`CREATE TABLE torture_register (k text PRIMARY KEY, v bigint NOT NULL, token bigint NOT NULL)`,
		`INSERT INTO torture_register VALUES ('r', 0, 0)`,
		`CREATE TABLE torture_log (v bigint PRIMARY KEY, token bigint NOT NULL, worker int NOT NULL, kind text NOT NULL)`,
		`DELETE FROM zklock_fence WHERE name = '` + tortureFence + `'`,
	} {
		if _, err := db.Exec(q); err != nil && !strings.Contains(q, "zklock_fence") {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

type tortureRun struct {
	t       *testing.T
	rng     *rand.Rand
	workers []*tortureProc
	wg      sync.WaitGroup

	mu     sync.Mutex
	events []tortureEvent
	pauses map[string]int // by kind: short (below the session), long (past it)
}

type tortureProc struct {
	id      int
	cmd     *exec.Cmd
	stdin   interface{ Close() error }
	holding bool // guarded by tortureRun.mu
}

func (tr *tortureRun) start(id int, servers []string, dsn string) {
	t := tr.t
	cmd := exec.Command(os.Args[0], "-test.run=^TestFenceTorture$", "-test.count=1")
	cmd.Env = append(os.Environ(), "FENCE_TORTURE_WORKER="+fmt.Sprint(id),
		"FENCE_TORTURE_ZK="+strings.Join(servers, ","), "FENCE_TORTURE_DSN="+dsn)
	cmd.Stderr = os.Stderr
	// A worker dies with the test: a worker left stopped (SIGSTOP) by a
	// test that was killed would otherwise stay so for good.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &tortureProc{id: id, cmd: cmd, stdin: stdin}
	tr.workers = append(tr.workers, p)
	tr.wg.Add(1)
	go func() {
		defer tr.wg.Done()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			tr.record(p, sc.Bytes())
		}
	}()
}

func (tr *tortureRun) record(p *tortureProc, line []byte) {
	var ev tortureEvent
	if json.Unmarshal(line, &ev) != nil {
		return // the test framework's own lines
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.events = append(tr.events, ev)
	switch ev.Ev {
	case "held":
		p.holding = true
	case "released":
		p.holding = false
	}
}

// faults pauses a holding worker every 0.5 to 2 s: a third of the pauses
// shorter than its session, the rest past it.
func (tr *tortureRun) faults(d time.Duration) {
	tr.pauses = map[string]int{}
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		time.Sleep(time.Duration(500+tr.rng.IntN(1500)) * time.Millisecond)
		p := tr.holder()
		if p == nil {
			continue
		}
		kind, pause := "long", tortureSession+time.Duration(300+tr.rng.IntN(2000))*time.Millisecond
		if tr.rng.IntN(3) == 0 {
			kind, pause = "short", time.Duration(100+tr.rng.IntN(600))*time.Millisecond
		}
		_ = p.cmd.Process.Signal(syscall.SIGSTOP)
		time.Sleep(pause)
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		tr.pauses[kind]++
	}
}

func (tr *tortureRun) holder() *tortureProc {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var holding []*tortureProc
	for _, p := range tr.workers {
		if p.holding {
			holding = append(holding, p)
		}
	}
	if len(holding) == 0 {
		return nil
	}
	return holding[tr.rng.IntN(len(holding))]
}

func (tr *tortureRun) stopAll() {
	for _, p := range tr.workers {
		_ = p.stdin.Close()
	}
	done := make(chan struct{})
	go func() { tr.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		for _, p := range tr.workers {
			_ = p.cmd.Process.Kill()
		}
		tr.t.Error("workers still running 30 s after they were told to stop: killed")
		<-done
	}
	for _, p := range tr.workers {
		if err := p.cmd.Wait(); err != nil {
			tr.t.Errorf("worker %d: %v", p.id, err)
		}
	}
}
