package zkserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
)

// Dynamic reconfiguration (Config.Reconfig): the servers run with
// reconfigEnabled, every server line names its client address, and a
// member can join or leave while the ensemble serves. The reconfig request
// itself is a client's (zktest's Cluster.AddServer and RemoveServer); this
// file starts the joining server and keeps the cluster's view of who is a
// member.

// reconfigLines are zoo.cfg's lines for Config.Reconfig: ZooKeeper then
// moves the server lines to a dynamic file of its own, and keeps the
// current membership there across restarts. skipACL lets the tests' clients
// send reconfig requests without the super user.
const reconfigLines = "reconfigEnabled=true\nstandaloneEnabled=false\n"

// memberLine is s's line in a dynamic configuration: its peer ports, its
// role, and its client address after the semicolon.
func (s *Server) memberLine() string {
	role := "participant"
	if s.observer {
		role = "observer"
	}
	return fmt.Sprintf("server.%d=127.0.0.1:%d:%d:%s;127.0.0.1:%d", s.id, s.quorumPort, s.electionPort, role, s.clientPort)
}

// MemberLine is s's line in the ensemble's dynamic configuration, as a
// reconfig request adds it ("server.4=127.0.0.1:…:…:participant;127.0.0.1:…").
func (s *Server) MemberLine() string { return s.memberLine() }

// Removed reports whether a reconfig removed s from the ensemble
// (MarkRemoved).
func (s *Server) Removed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.removed
}

// MarkRemoved records that a reconfig removed s: it leaves Addrs and the
// health checks. Stop it as well.
func (s *Server) MarkRemoved() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removed = true
}

// AddServer starts one more server on new ports, its config listing the
// current members and itself, as ZooKeeper's procedure for adding a member
// asks: it syncs with the leader as a non-voting learner until a reconfig
// adds it. It returns once the server serves; the reconfig is the caller's.
func (c *Cluster) AddServer(ctx context.Context) (*Server, error) {
	if c.external || !c.cfg.Reconfig {
		return nil, fmt.Errorf("zktest: AddServer needs a cluster started here with reconfiguration enabled")
	}
	id := len(c.servers) + 1
	dir := fmt.Sprintf("%s/zk%d", c.baseDir, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	s := &Server{c: c, index: id - 1, id: id, dir: dir, tail: newLogTail(400)}
	if err := c.allocateFor(s); err != nil {
		return nil, err
	}
	c.servers = append(c.servers, s)
	if err := s.writeConfig(); err != nil {
		return nil, err
	}
	if err := s.launch(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
	defer cancel()
	return s, s.waitServing(ctx)
}

// allocateFor reserves a client, a quorum and an election port for s.
func (c *Cluster) allocateFor(s *Server) error {
	low, high := portRange()
	var ports []int
	for range 3 {
		lk, l, err := takePort(low, high)
		if err != nil {
			return fmt.Errorf("zktest: allocating a loopback port: %w", err)
		}
		defer l.Close()
		c.ports = append(c.ports, lk)
		ports = append(ports, lk.port)
	}
	s.clientPort, s.quorumPort, s.electionPort = ports[0], ports[1], ports[2]
	s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.clientPort))
	return nil
}

// members is the servers a reconfig has not removed.
func (c *Cluster) members() []*Server {
	var out []*Server
	for _, s := range c.servers {
		if !s.Removed() {
			out = append(out, s)
		}
	}
	return out
}

// Rejoin starts a server that a reconfig removed again, as a fresh machine
// at its address: its data wiped, its config listing the current members
// and itself. It syncs with the leader as a non-voting learner until a
// reconfig adds it back (the caller's); it returns once it serves.
func (s *Server) Rejoin(ctx context.Context) error {
	if s.external || !s.c.cfg.Reconfig {
		return fmt.Errorf("zktest: Rejoin needs a cluster started here with reconfiguration enabled")
	}
	if err := s.kill(); err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(s.dir, "zoo.cfg*"))
	for _, f := range append(old, s.dataDir()) {
		if err := os.RemoveAll(f); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.removed = false
	s.mu.Unlock()
	if err := s.writeConfig(); err != nil {
		return err
	}
	if err := s.launch(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.c.cfg.StartTimeout)
	defer cancel()
	return s.waitServing(ctx)
}
