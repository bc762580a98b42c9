package lockservice_test

// BenchmarkServiceLoad: the service under the load of 1 000 callers, each
// with connections of its own, beside the same callers through the library
// in the same run. go test -run '^$' -bench ServiceLoad -benchtime 3x
// -timeout 20m ./cmd/zklock/internal/lockservice/ (three rounds, about two
// minutes); the figures are in docs/performance.md.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

const (
	loadCallers = 1000             // callers at once, two on each lock path
	loadPhase   = 10 * time.Second // each timed phase
	loadWarm    = 2                // untimed cycles per caller before the start barrier
	loadSession = 30 * time.Second // the service's and the library's session timeout
	loadTTL     = loadSession / 3  // the leases' TTL, the longest the service grants (a third of its session timeout)
)

// loadEnv is what a BenchmarkServiceLoad run measures with: its ZooKeeper,
// the library's client (one session, as the service has) and the service
// process.
type loadEnv struct {
	cluster *zktest.Cluster
	lib     *zklock.Client
	child   *loadChild
}

// BenchmarkServiceLoad runs rounds (-benchtime Nx for N), each a library
// phase and a service phase (in turns first), then measures what holdings
// cost the service. In the library phase loadCallers goroutines share one
// client; in the service phase half hold with streams and half with leases,
// a stream caller and a lease caller on each path. ZooKeeper fsyncs every
// write, as in production.
func BenchmarkServiceLoad(b *testing.B) {
	if err := raiseNoFile(4*loadCallers + 256); err != nil {
		b.Fatal(err)
	}
	quiet := zktest.WithLogf(func(string, ...any) {}) // the server's log would crowd out the figures
	zk := zktest.Start(b, zktest.WithTickTime(500*time.Millisecond), zktest.WithForceSync(), quiet)
	ctx := context.Background()
	client, err := zklock.Connect(ctx, zk.Addrs(), zklock.WithSessionTimeout(loadSession))
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	e := &loadEnv{cluster: zk, lib: client, child: startLoadChild(b, zk.Addrs())}
	var rounds []loadRound
	for r := 0; b.Loop(); r++ {
		rd, err := e.round(ctx, r)
		if err != nil {
			b.Fatal(err)
		}
		rounds = append(rounds, rd)
	}
	streams, err := e.streamHoldings(ctx, loadCallers)
	if err != nil {
		b.Fatal(err)
	}
	leases, err := e.leaseHoldings(ctx, loadCallers)
	if err != nil {
		b.Fatal(err)
	}
	reportLoad(b, rounds, streams, leases)
}

// loadRound is one round's two phases.
type loadRound struct{ lib, svc phase }

func (e *loadEnv) round(ctx context.Context, r int) (loadRound, error) {
	var rd loadRound
	phases := []func() error{
		func() (err error) { rd.lib, err = e.runWorkers(ctx, e.libWorkers()); return err },
		func() (err error) { rd.svc, err = e.runWorkers(ctx, e.svcWorkers()); return err },
	}
	if r%2 == 1 {
		phases[0], phases[1] = phases[1], phases[0]
	}
	for _, run := range phases {
		if err := run(); err != nil {
			return rd, err
		}
	}
	if n := rd.lib.overlaps + rd.svc.overlaps; n > 0 {
		return rd, fmt.Errorf("two holders at once, %d times", n)
	}
	return rd, nil
}

// runWorkers runs a phase of ws, then ends their leases and connections.
func (e *loadEnv) runWorkers(ctx context.Context, ws []loadWorker) (phase, error) {
	defer func() { _ = parallel(len(ws), func(i int) error { ws[i].close(ctx); return nil }) }()
	return e.runPhase(ctx, ws)
}

func (e *loadEnv) libWorkers() []loadWorker {
	seq := benchSeq.Add(1)
	ws := make([]loadWorker, loadCallers)
	for i := range ws {
		m, err := e.lib.NewMutex(fmt.Sprintf("/zklock-serve-load/%d/p%d", seq, i/2))
		if err != nil {
			panic(err) // the path is ours and valid
		}
		ws[i] = &libWorker{m: m}
	}
	return ws
}

func (e *loadEnv) svcWorkers() []loadWorker {
	seq := benchSeq.Add(1)
	ws := make([]loadWorker, loadCallers)
	for i := range ws {
		path := fmt.Sprintf("/zklock-serve-load/%d/p%d", seq, i/2)
		if i%2 == 0 {
			ws[i] = &streamWorker{hc: newCallerHTTP(), url: e.child.url, path: path}
		} else {
			ws[i] = &leaseWorker{hc: newCallerHTTP(), url: e.child.url, path: path}
		}
	}
	return ws
}
