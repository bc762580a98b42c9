package zktest

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/zklock/zklock/internal/zkserver"
)

// Faults that operators make while the ensemble serves: a rolling restart, a
// member restored from an older backup, a zxid counter that runs out.

// RollingRestart restarts every running server in turn, as an upgrade does:
// the followers and observers first, the leader last. Each is stopped
// gracefully (SIGTERM), started again on its ports and data, and waited for
// until the ensemble is healthy again (a leader, a quorum) before gap passes
// and the next one goes. ctx bounds the whole. The leader's restart makes
// the ensemble elect another; the others' only move their clients.
func (c *Cluster) RollingRestart(ctx context.Context, gap time.Duration) error {
	if c.c.External() {
		return c.servers[0].externalFault("RollingRestart")
	}
	order, err := c.rollingOrder()
	if err != nil {
		return err
	}
	for n, s := range order {
		if n > 0 && !sleepCtx(ctx, gap) {
			return ctx.Err()
		}
		if err := s.Stop(); err != nil {
			return err
		}
		if err := s.Restart(ctx); err != nil {
			return err
		}
		if err := c.WaitHealthy(ctx); err != nil {
			return fmt.Errorf("zktest: after restarting server %d: %w", s.ID(), err)
		}
	}
	return nil
}

// rollingOrder is the running servers with the leader moved to the end.
func (c *Cluster) rollingOrder() ([]*Server, error) {
	leader, err := c.Leader()
	if err != nil {
		return nil, err
	}
	var order []*Server
	for i, s := range c.servers {
		if s.Running() && i != leader {
			order = append(order, s)
		}
	}
	return append(order, c.servers[leader]), nil
}

// sleepCtx waits for d; false if ctx ended first.
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

// Checkpoint is a copy of one server's data directory (snapshots,
// transaction logs, epoch files) taken by Server.Checkpoint: a backup, for
// Server.RestartFrom.
type Checkpoint = zkserver.Checkpoint

// Checkpoint copies the server's data directory as it is now. A running
// server is frozen for the moment of the copy (SIGSTOP), so that no write is
// caught halfway. The copy goes with the cluster.
func (s *Server) Checkpoint() (*Checkpoint, error) {
	if s.s.External() {
		return nil, s.externalFault("Checkpoint")
	}
	return s.s.Checkpoint()
}

// RestartFrom kills the server, puts its data directory back to cp (taken
// from this server), and starts it again, as Restart does: a member restored
// from an older backup, or whose disk lost its latest writes, so that it
// comes back behind the others. A follower so restored syncs from the
// leader before it serves clients, and ZooKeeper refuses to resume a session
// on a server that has not seen the session's latest zxid; this fault is how
// to check a client relies on both. Restore one member at a time: a
// majority restored from old backups loses committed writes, which no
// client can make up for.
func (s *Server) RestartFrom(ctx context.Context, cp *Checkpoint) error {
	if s.s.External() {
		return s.externalFault("RestartFrom")
	}
	return s.s.RestartFrom(ctx, cp)
}

// PeerPorts returns the ports the server binds for the other servers: its
// quorum port (where followers reach it while it leads) and its election
// port. Loss.Drop on them makes the links between servers lossy.
func (s *Server) PeerPorts() (quorum, election int) { return s.s.PeerPorts() }

// WithInitialZxid makes each new leader start its epoch's zxid counter (the
// low 32 bits of every zxid) at low, through ZooKeeper's system property
// zookeeper.testingonly.initialZxid. A leader whose counter reaches
// 0xffffffff refuses that transaction and steps down ("zxid lower 32 bits
// have rolled over"), and the ensemble elects again into a new epoch: with
// low near the end, the epoch rolls over after 0xffffffff-low transactions,
// and again after as many in every later epoch. Zxids (and so lock tokens,
// which are creation zxids) keep growing across it; the transaction that hit
// the end is lost with the connection, and its client is told so. Only an
// ensemble has leaders: a standalone server ignores it.
func WithInitialZxid(low uint32) Option {
	return WithSystemProperty("zookeeper.testingonly.initialZxid", strconv.FormatUint(uint64(low), 10))
}
