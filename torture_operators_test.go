//go:build linux

package zklock_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/zklock/zklock/zktest"
)

// The swarm's operators' dimensions (issue 51): a rolling restart
// ("rolling"), a member restored from an older backup ("lagging"), lossy
// links between clients and servers and between servers ("loss"), and a
// zxid counter that runs out every few thousand transactions ("rollover").
// Their faults share serverBusy with kills and pauses (never two servers
// out), but for loss, which has a busy flag of its own.

// tortureRolloverRun is how many transactions a leader's epoch lasts with
// "rollover" on (zktest.WithInitialZxid): a few a minute at the torture's
// rate (500 made one every 3 s: 201 in 10 minutes; 3000 none, the leader
// changing first).
const tortureRolloverRun = 2000

// operatorOptions are the ensemble's options for the drawn dimensions:
// with reconfig, dynamic reconfiguration; with rollover, each leader starts
// its counter tortureRolloverRun short of the end, and its log lines saying
// it stepped down for it are counted.
func (tt *torture) operatorOptions() []zktest.Option {
	var opts []zktest.Option
	if tt.cfg.sw.reconfig {
		opts = append(opts, zktest.WithReconfig())
	}
	if !tt.cfg.sw.rollover {
		return opts
	}
	count := func(format string, args ...any) {
		if strings.Contains(fmt.Sprint(args...), "rolled over") { // "zk%d: %s", the server's line
			tt.counts.add("rollover.stepdowns")
		}
	}
	return append(opts, zktest.WithInitialZxid(0xffffffff-tortureRolloverRun), zktest.WithLogf(count))
}

// replaceMember removes a member (the leader when f.server < 0) with a
// reconfig, wipes it and adds it back with another: the ensemble runs on two
// voters meanwhile, and its membership changes twice under the clients.
func (tt *torture) replaceMember(f fault) {
	i := f.server
	if i < 0 {
		i = tt.leaderOrFirst()
	}
	tt.began(f.kind, "server %d removed, wiped and added back (the leader: %v)", i+1, f.server < 0)
	ctx, cancel := context.WithTimeout(tt.ctx, 3*time.Minute)
	defer cancel()
	if err := tt.cluster.ReplaceServer(ctx, i); err != nil && tt.ctx.Err() == nil {
		tt.t.Errorf("harness: replacing server %d: %v", i+1, err)
	}
	tt.lg.note(fmt.Sprintf("server %d a member again", i+1))
}

// rollingRestart restarts the three servers in turn, the leader last, with
// a pause of 0.2-2 s between two.
func (tt *torture) rollingRestart(f fault) {
	gap := between(f.u1, 200*time.Millisecond, 2*time.Second)
	tt.began(f.kind, "of the three servers, %v apart", gap.Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(tt.ctx, 5*time.Minute)
	defer cancel()
	if err := tt.cluster.RollingRestart(ctx, gap); err != nil && tt.ctx.Err() == nil {
		tt.t.Errorf("harness: rolling restart: %v", err)
	}
	tt.lg.note("rolling restart done")
}

// restoreBackup takes a backup of a follower, lets the ensemble move on for
// 0.5 s to 2 T (half the time with the follower down meanwhile), and puts
// the follower back to the backup: it restarts behind the others, and must
// catch up before it serves.
func (tt *torture) restoreBackup(f fault) {
	leader, err := tt.cluster.Leader()
	if err != nil {
		tt.counts.add("skipped." + f.kind.String())
		return
	}
	s := tt.cluster.Servers()[(leader+1+int(f.u2*2))%3]
	behind := between(f.u1, 500*time.Millisecond, 2*tortureSession)
	tt.began(f.kind, "server %d restored from a backup %v old (down meanwhile: %v)", s.ID(), behind.Round(time.Millisecond), f.flag)
	backup, err := s.Checkpoint()
	if err != nil {
		tt.t.Errorf("harness: backup of server %d: %v", s.ID(), err)
		return
	}
	if f.flag {
		if err := s.Kill(); err != nil {
			tt.t.Errorf("harness: killing server %d: %v", s.ID(), err)
		}
	}
	if !sleepCtx(tt.ctx, behind) {
		return
	}
	ctx, cancel := context.WithTimeout(tt.ctx, 2*time.Minute)
	defer cancel()
	if err := s.RestartFrom(ctx, backup); err != nil && tt.ctx.Err() == nil {
		tt.t.Errorf("harness: restoring server %d: %v", s.ID(), err)
	}
	tt.healthyAgain("a restore", fmt.Sprintf("server %d restored", s.ID()))
}

// lossyLink drops 1-20 % of one link's packets for 0.5 s to 2 T, one
// direction only: half the time a server's client port (the requests to
// it, or its replies), else the leader's quorum port (what it sends its
// followers, or what they send it).
func (tt *torture) lossyLink(f fault) {
	i := f.server
	if i < 0 {
		i = tt.leaderOrFirst()
	}
	s := tt.cluster.Servers()[i]
	port, link := clientPortOf(s), "client port"
	if !f.flag {
		port, _ = s.PeerPorts()
		link = "quorum port"
	}
	dir, way := zktest.ToPort, "to"
	if f.u2 < 0.5 {
		dir, way = zktest.FromPort, "from"
	}
	frac := f.u2 * 2 // u2 < 0.5 chose the direction; what remains, the share
	if frac >= 1 {
		frac--
	}
	percent := 1 + int(frac*20)%20
	d := between(f.u1, 500*time.Millisecond, 2*tortureSession)
	tt.began(f.kind, "%d %% of the packets %s server %d's %s for %v", percent, way, s.ID(), link, d.Round(time.Millisecond))
	if err := tt.loss.Drop(port, dir, percent); err != nil {
		tt.t.Errorf("harness: %v", err)
		return
	}
	sleepCtx(tt.ctx, d)
	if n, err := tt.loss.Dropped(); err == nil {
		tt.counts.addN("loss.dropped", int(n))
	}
	if err := tt.loss.Heal(); err != nil {
		tt.t.Errorf("harness: %v", err)
	}
	tt.lg.note("link healed")
}

// clientPortOf is s's client port.
func clientPortOf(s *zktest.Server) int {
	var port int
	fmt.Sscanf(s.Addr()[strings.LastIndexByte(s.Addr(), ':')+1:], "%d", &port)
	return port
}

// leaderOrFirst is the index of the server leading now, or 0 while none does
// (an election under way: after a kill, a pause, a rollover).
func (tt *torture) leaderOrFirst() int {
	if i, err := tt.cluster.Leader(); err == nil {
		return i
	}
	return 0
}
