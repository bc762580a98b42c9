package zktest

// Partitions between servers: every server-to-server connection of an
// ensemble started WithPartitions goes through a Proxy of its own, so a test
// can cut one server off from its peers while its clients still reach it.

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/zklock/zklock/internal/zkserver"
)

// ErrNoPartitions is returned by Partition and Heal on a cluster started
// without WithPartitions, whose servers talk to each other directly.
var ErrNoPartitions = errors.New("zktest: the cluster was not started WithPartitions")

// link is one directed server-to-server connection: from dials to's quorum
// port, or its election port.
type link struct {
	from, to int
	election bool
}

// partitions holds the proxy of every link and which servers are cut off. A
// link is stalled while either of its ends is partitioned.
type partitions struct {
	mu      sync.Mutex
	proxies map[link]*Proxy
	cut     map[int]bool
}

func newPartitions() *partitions {
	return &partitions{proxies: map[link]*Proxy{}, cut: map[int]bool{}}
}

// peerPort is zkserver's Config.PeerPort: it starts the link's proxy in
// front of the port the peer binds and returns the proxy's port. When start
// retries on new ports, the link's proxy of the earlier attempt (whose
// target is stale) is closed and replaced.
func (p *partitions) peerPort(l zkserver.PeerLink) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := link{l.From, l.To, l.Election}
	target := net.JoinHostPort("127.0.0.1", strconv.Itoa(l.Port))
	if old := p.proxies[k]; old != nil {
		if old.targets[0] == target {
			return proxyPort(old), nil
		}
		_ = old.Close()
		delete(p.proxies, k)
	}
	px, err := listenProxy(linkRedial, target)
	if err != nil {
		return 0, fmt.Errorf("zktest: proxy from server %d to server %d: %w", l.From+1, l.To+1, err)
	}
	p.proxies[k] = px
	p.applyLocked(k, px)
	return proxyPort(px), nil
}

// linkRedial is how long a link's proxy keeps dialing a peer that refuses
// before it resets the connection it accepted. It cannot refuse that
// connection as the peer did (it accepted it before dialing), and ZooKeeper
// treats the two differently: a follower retries a leader that refuses
// (every 100ms), as a new leader does until it binds its quorum port, but
// gives up the leader at a reset and starts a new election, which costs
// seconds (measured: a partitioned leader replaced after 3.6 s instead of
// 1.4 s). With a short redial the follower sees a slow connection instead.
const linkRedial = 500 * time.Millisecond

func proxyPort(px *Proxy) int { return px.ln.Addr().(*net.TCPAddr).Port }

// set marks server i partitioned (or not) and stalls or resumes every link.
func (p *partitions) set(i int, cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cut {
		p.cut[i] = true
	} else {
		delete(p.cut, i)
	}
	for k, px := range p.proxies {
		p.applyLocked(k, px)
	}
}

// applyLocked stalls the link's proxy while either end is partitioned and
// resumes it otherwise.
func (p *partitions) applyLocked(k link, px *Proxy) {
	if p.cut[k.from] || p.cut[k.to] {
		px.Stall()
	} else {
		px.Resume()
	}
}

// partitioned returns the partitioned servers' indexes in order.
func (p *partitions) partitioned() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]int, 0, len(p.cut))
	for i := range p.cut {
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}

// close closes every proxy; a nil p does nothing.
func (p *partitions) close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, px := range p.proxies {
		_ = px.Close()
		delete(p.proxies, k)
	}
}

// Partition cuts server i off from every other server of an ensemble started
// WithPartitions, while its clients still reach it: the connections between
// it and its peers, quorum and election, in both directions, stop carrying
// bytes without being closed or reset, and new ones are accepted but stalled
// too, which is what silently dropped packets look like. A cut-off follower
// goes on answering its clients' reads and pings (their writes and syncs
// hang) until its own read from the leader times out, syncLimit (5) ticks
// (WithTickTime) after the last packet it got, while the leader expires the
// sessions it hears nothing about; a cut-off leader steps down after as
// long, and the others elect a new one. Partitioning a partitioned server
// does nothing.
//
// A partitioned server cannot rejoin a quorum, so Server.Restart of one
// waits in vain until Heal. Stop, Kill and Restart keep its partition: the
// proxies live, on the same ports, as long as the cluster.
func (c *Cluster) Partition(i int) error {
	p, err := c.partitionsOf(i, "Partition")
	if err != nil {
		return err
	}
	p.set(i, true)
	return nil
}

// Heal ends server i's partition: its links to servers that are not
// partitioned themselves carry bytes again. The bytes held meanwhile are
// delivered then, in order, closes included, as TCP retransmission delivers
// them after a real partition heals: a peer may read stale quorum or
// election messages before it sees a connection that was closed during the
// partition end. Healing a server that is not partitioned does nothing.
func (c *Cluster) Heal(i int) error {
	p, err := c.partitionsOf(i, "Heal")
	if err != nil {
		return err
	}
	p.set(i, false)
	return nil
}

// Partitioned returns the indexes of the partitioned servers, in order
// (none for a cluster started without WithPartitions).
func (c *Cluster) Partitioned() []int {
	if c.parts == nil {
		return nil
	}
	return c.parts.partitioned()
}

// partitionsOf returns the proxies of a cluster on which op may act on
// server i, or why not.
func (c *Cluster) partitionsOf(i int, op string) (*partitions, error) {
	switch {
	case c.External():
		return nil, fmt.Errorf("zktest: %s needs servers started here (%s is set): %w", op, EnvServers, ErrExternal)
	case c.parts == nil:
		return nil, ErrNoPartitions
	case i < 0 || i >= len(c.servers):
		return nil, fmt.Errorf("zktest: %s(%d): no server %d among %d", op, i, i, len(c.servers))
	}
	return c.parts, nil
}
