package main

import (
	"fmt"
	"time"

	"github.com/zklock/zklock/internal/benchkit"
	"github.com/zklock/zklock/zktest"
)

// startServers starts the ensemble: voters plus observers, each a JVM here,
// with production's fsync of every transaction log write.
func startServers(voters, observers int) (*zktest.Cluster, func(), error) {
	c, stop, err := zktest.StartMain(
		zktest.WithEnsemble(voters), zktest.WithObservers(observers),
		zktest.WithForceSync(),
		zktest.WithTickTime(500*time.Millisecond)) // sync and init limits that a loaded machine keeps
	if err != nil {
		return nil, nil, fmt.Errorf("zklock-scale: starting ZooKeeper (run `make zk` to install it): %w", err)
	}
	if c.External() {
		stop()
		return nil, nil, fmt.Errorf("zklock-scale: needs servers started here, not %s", zktest.EnvServers)
	}
	return c, stop, nil
}

// serverSnap is every server's counters and process figures at one moment.
type serverSnap struct {
	at   time.Time
	mntr []zktest.Mntr
	cpu  []time.Duration
	rss  []uint64
}

func snapServers(c *zktest.Cluster) (serverSnap, error) {
	s := serverSnap{at: time.Now()}
	for i, srv := range c.Servers() {
		m, err := c.Mntr(i)
		if err != nil {
			return s, fmt.Errorf("zklock-scale: mntr of server %d: %w", i+1, err)
		}
		s.mntr = append(s.mntr, m)
		s.cpu = append(s.cpu, benchkit.PidCPU(srv.PID()))
		s.rss = append(s.rss, pidRSS(srv.PID()))
	}
	return s, nil
}

// delta is the sum over the servers of key's growth from b to a.
func delta(b, a serverSnap, key string) int64 {
	var n int64
	for i := range a.mntr {
		n += a.mntr[i].Int(key) - b.mntr[i].Int(key)
	}
	return n
}

// watchEvents is the watch notifications all servers sent from b to a.
func watchEvents(b, a serverSnap) int64 {
	var n int64
	for i := range a.mntr {
		n += zktest.WatchEventsFired(b.mntr[i], a.mntr[i])
	}
	return n
}

func (s serverSnap) totalCPU() time.Duration {
	var d time.Duration
	for _, c := range s.cpu {
		d += c
	}
	return d
}

func (s serverSnap) totalRSS() uint64 {
	var n uint64
	for _, r := range s.rss {
		n += r
	}
	return n
}

// watchCount is zk_watch_count summed over the servers: the watches set now.
func watchCount(c *zktest.Cluster) (int64, error) {
	var n int64
	for i := range c.Servers() {
		m, err := c.Mntr(i)
		if err != nil {
			return 0, fmt.Errorf("zklock-scale: mntr of server %d: %w", i+1, err)
		}
		n += m.WatchCount()
	}
	return n, nil
}
