//go:build linux

package zklock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// The torture's leadership work: elect campaigns on the mutex paths (an
// election shares the mutex's nodes, so the ledger's overlap check covers
// leaders), proclaims, and makes a guarded write to the path's fence node;
// an observer per path, on a client of its own, must end on the last
// leader (nobody) once the faults have healed and the work has stopped.

// fenceRoot holds one fence node per lock path, under the torture's root
// (chroot clients write there too), where no lock path lies; the final
// check of what is left skips it.
func (tt *torture) fenceRoot() string { return tt.cfg.root + "/fence" }

func (tt *torture) fenceNode(path string) string {
	return tt.fenceRoot() + "/" + strings.ReplaceAll(strings.TrimPrefix(path, "/"), "/", "_")
}

// makeFences creates the fence nodes, each holding token 0.
func (tt *torture) makeFences() {
	if _, err := tt.obs.Create(tt.fenceRoot(), nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		tt.t.Fatalf("creating %s: %v", tt.fenceRoot(), err)
	}
	for _, p := range tt.cfg.paths {
		if _, err := tt.obs.Create(tt.fenceNode(p), []byte("0"), 0, zk.WorldACL(zk.PermAll)); err != nil {
			tt.t.Fatalf("creating the fence of %s: %v", p, err)
		}
	}
}

func (tt *torture) removeFences() {
	for _, p := range tt.cfg.paths {
		_ = tt.obs.Delete(tt.fenceNode(p), -1)
	}
	_ = tt.obs.Delete(tt.fenceRoot(), -1)
}

// elect campaigns, holds the leadership a while (proclaiming half the time),
// makes a guarded write, and resigns.
func (o *op) elect(ctx context.Context) {
	e, err := o.c.NewElection(o.lp(o.path))
	if err != nil {
		o.tt.lg.violate("NewElection(%s): %v", o.path, err)
		return
	}
	actx, cancel, dl := o.deadline(ctx)
	defer cancel()
	hold := o.holdTime()
	var lead *zklock.Leadership
	l, at, err := o.acquire(actx, dl, "elect", func(ctx context.Context) (*zklock.Lease, error) {
		ld, err := e.Campaign(ctx, o.who)
		if err != nil {
			return nil, err
		}
		lead = ld
		return ld.Lease(), nil
	})
	if err != nil {
		return
	}
	r := o.granted("elect", l, at, hold, "")
	if o.rng.IntN(2) == 0 {
		pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
		if err := lead.Proclaim(pctx, o.who+" proclaimed"); err == nil {
			o.tt.counts.add("elect.proclaimed")
		}
		pcancel()
	}
	o.guardedWrite(l)
	o.escape(l)
	o.hold(ctx, l.Done(), hold)
	o.guardedWrite(l) // after a long hold, often through a fault
	o.release(r, l.Release)
}

// guardedWrite writes the lease's token into the path's fence node with
// Lease.Multi, only over the value it read (a version check). Writes are
// then linear, and one that lands over a higher token was made by an older
// leader after a newer one had written: after the older one's node was
// gone, which the guard must prevent.
func (o *op) guardedWrite(l *zklock.Lease) {
	fence := o.tt.fenceNode(o.path)
	tok := tokenOf(l)
	data, stat, err := o.tt.obs.Get(fence)
	if err != nil || tok == 0 {
		return
	}
	prev, _ := strconv.ParseInt(string(data), 10, 64)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	set := &zk.SetDataRequest{Path: o.lp(fence), Data: []byte(strconv.FormatInt(tok, 10)), Version: stat.Version}
	_, err = l.Multi(ctx, set)
	switch {
	case err == nil:
		o.tt.counts.add("guarded.landed")
		if prev > tok {
			o.tt.lg.violate("%s: a guarded write with token %d landed over token %d on %s", o.who, tok, prev, fence)
		}
	case errors.Is(err, zklock.ErrLockLost), errors.Is(err, zklock.ErrClosed):
		o.tt.counts.add("guarded.refused_lost")
	case errors.Is(err, zk.ErrBadVersion):
		o.tt.counts.add("guarded.refused_version")
	default:
		o.tt.counts.add("guarded.unknown")
	}
}

// leaderWatch is one path's observer.
type leaderWatch struct {
	path    string
	changes <-chan zklock.Leader
}

// startObservers opens a client of its own (through its own proxy: server
// faults reach it) and observes every mutex path.
func (tt *torture) startObservers() {
	proxy := zktest.NewProxy(tt.t, tt.cluster.Addrs()...)
	ctx, cancel := context.WithTimeout(tt.ctx, time.Minute)
	defer cancel()
	c, err := zklock.Connect(ctx, []string{proxy.Addr()}, tortureOptions(tt.cfg.root, tortureSession, nil)...)
	if err != nil {
		tt.t.Fatalf("observer client: %v", err)
	}
	tt.observerClient, tt.observerProxy = c, proxy
	for _, p := range tt.cfg.paths {
		e, err := c.NewElection(p)
		if err != nil {
			tt.t.Fatalf("NewElection(%s): %v", p, err)
		}
		tt.leaderWatches = append(tt.leaderWatches, leaderWatch{p, e.Observe(tt.ctx)})
	}
}

// checkObservers: with the work stopped and every lease released, each
// observer ends on "nobody leads" within the bound.
func (tt *torture) checkObservers() {
	deadline := time.After(20 * time.Second)
	for _, w := range tt.leaderWatches {
		last := zklock.Leader{Node: "(nothing observed)"}
	drain:
		for {
			select {
			case ld, ok := <-w.changes:
				if !ok {
					tt.lg.violate("the observer of %s stopped", w.path)
					break drain
				}
				last = ld
				if ld.Node == "" {
					break drain
				}
			case <-deadline:
				tt.lg.violate("the observer of %s did not converge: last saw %q leading", w.path, last.Node)
				break drain
			}
		}
	}
	tt.observerClient.Close()
	_ = tt.observerProxy.Close()
}
