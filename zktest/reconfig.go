package zktest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// Dynamic reconfiguration: an ensemble whose membership changes while it
// serves, as an operator moves it to new machines with ZooKeeper's reconfig
// (3.5 and later).

// WithReconfig starts the servers with dynamic reconfiguration enabled
// (reconfigEnabled=true, standaloneEnabled=false, each server line naming
// its client address, so that /zookeeper/config lists where clients reach
// every member), so that Cluster.AddServer and RemoveServer can change the
// membership. The servers skip ACL checks (zookeeper.skipACL), so that any
// client may send the reconfig; do not test ACLs on such a cluster. Not
// with WithPartitions or WithTLS.
func WithReconfig() Option {
	return func(c *config) {
		c.Reconfig = true
		c.SysProps = append(c.SysProps, [2]string{"zookeeper.skipACL", "yes"})
	}
}

// AddServer starts a new server on new ports (the next id), lets it sync
// with the leader, and adds it to the ensemble as a voting member with a
// reconfig; it returns once the ensemble is healthy with it. Addrs then
// includes it.
func (c *Cluster) AddServer(ctx context.Context) (*Server, error) {
	s, err := c.c.AddServer(ctx)
	if err != nil {
		return nil, err
	}
	srv := &Server{s: s, c: c}
	c.servers = append(c.servers, srv)
	if err := c.reconfig(ctx, c.Addrs(), []string{s.MemberLine()}, nil); err != nil {
		return nil, fmt.Errorf("zktest: adding server %d: %w", s.ID(), err)
	}
	return srv, c.WaitHealthy(ctx)
}

// RemoveServer removes server i (an index into Servers) from the ensemble
// with a reconfig, sent through the other members, then stops it; it
// returns once the ensemble is healthy without it. Addrs then leaves it out.
// Removing the leader makes the others elect one.
func (c *Cluster) RemoveServer(ctx context.Context, i int) error {
	s := c.servers[i]
	var others []string
	for _, o := range c.servers {
		if o != s && !o.s.Removed() && o.Running() {
			others = append(others, o.Addr())
		}
	}
	if err := c.reconfig(ctx, others, nil, []string{strconv.Itoa(s.ID())}); err != nil {
		return fmt.Errorf("zktest: removing server %d: %w", s.ID(), err)
	}
	s.s.MarkRemoved()
	if err := s.Stop(); err != nil {
		return err
	}
	return c.WaitHealthy(ctx)
}

// ReplaceServer removes server i from the ensemble with a reconfig, stops
// it, wipes its data and adds it back with another reconfig, as an operator
// replaces a member's machine by a fresh one at the same address; it
// returns once the ensemble is healthy with it again. Clients keep the same
// addresses throughout. Replacing the leader makes the others elect one.
func (c *Cluster) ReplaceServer(ctx context.Context, i int) error {
	if err := c.RemoveServer(ctx, i); err != nil {
		return err
	}
	s := c.servers[i]
	if err := s.s.Rejoin(ctx); err != nil {
		return fmt.Errorf("zktest: restarting server %d afresh: %w", s.ID(), err)
	}
	if err := c.reconfig(ctx, c.Addrs(), []string{s.s.MemberLine()}, nil); err != nil {
		return fmt.Errorf("zktest: adding server %d back: %w", s.ID(), err)
	}
	return c.WaitHealthy(ctx)
}

// reconfig sends an incremental reconfig through a session on addrs,
// again while ZooKeeper says another is under way or the connection drops.
func (c *Cluster) reconfig(ctx context.Context, addrs, joining, leaving []string) error {
	conn, events, err := zk.Connect(addrs, 10*time.Second, zk.WithLogger(log.New(io.Discard, "", 0)), zk.WithLogInfo(false))
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := waitSession(ctx, events); err != nil {
		return err
	}
	for {
		_, err := conn.IncrementalReconfig(joining, leaving, -1)
		if err == nil || !retryReconfig(err) {
			return err
		}
		if !sleepCtx(ctx, 200*time.Millisecond) {
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		}
		// A reconfig whose reply was lost may have been made: a second one
		// would find nothing to change.
		if data, _, gerr := conn.Get("/zookeeper/config"); gerr == nil && reconfigApplied(string(data), joining, leaving) {
			return nil
		}
	}
}

// retryReconfig reports a reconfig failure that a moment later may not
// repeat: a dropped connection (go-zookeeper's "could not connect to a
// server" when a reconnection went once round every address, as when the
// leader leaves), or ZooKeeper's ZRECONFIGINPROGRESS (-14) and
// ZNEWCONFIGNOQUORUM (-13, the joiner not yet synced), which go-zookeeper
// has no error values for.
func retryReconfig(err error) bool {
	msg := err.Error()
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrSessionMoved) || errors.Is(err, zk.ErrNoServer) ||
		strings.HasSuffix(msg, "-13") || strings.HasSuffix(msg, "-14")
}

// reconfigApplied reports whether the configuration config has every
// joining member's server line and none of the leaving ids'.
func reconfigApplied(config string, joining, leaving []string) bool {
	ids := map[string]bool{}
	for _, line := range strings.Split(config, "\n") {
		if key, _, ok := strings.Cut(line, "="); ok && strings.HasPrefix(key, "server.") {
			ids[strings.TrimPrefix(key, "server.")] = true
		}
	}
	for _, m := range joining {
		key, _, _ := strings.Cut(m, "=")
		if !ids[strings.TrimPrefix(key, "server.")] {
			return false
		}
	}
	for _, id := range leaving {
		if ids[id] {
			return false
		}
	}
	return true
}

// waitSession waits for a session on events.
func waitSession(ctx context.Context, events <-chan zk.Event) error {
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return nil
			}
		case <-ctx.Done():
			return fmt.Errorf("zktest: no session for a reconfig: %w", ctx.Err())
		}
	}
}
