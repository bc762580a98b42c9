package zklock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zklocktest/conformance"
	"github.com/zklock/zklock/zktest"
)

// conformanceSession is short, so that Expire (a stalled proxy until the
// server expires the session) costs a few seconds.
const conformanceSession = 2 * time.Second

// zkClient adapts a zklock Client, connected through a proxy of its own,
// to the conformance suite.
type zkClient struct {
	c     *zklock.Client
	proxy *zktest.Proxy
}

func (z zkClient) NewMutex(t *testing.T, path string) zklock.Locker {
	return mustMutex(t, z.c, path)
}

func (z zkClient) NewElection(t *testing.T, path string) conformance.Election {
	e, err := z.c.NewElection(path)
	require.NoError(t, err)
	return e
}

func (z zkClient) Mutex(path string) (zklock.Locker, error) {
	m, err := z.c.NewMutex(path)
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (z zkClient) Election(path string) (conformance.Election, error) {
	e, err := z.c.NewElection(path)
	if err != nil {
		return nil, err
	}
	return e, nil
}

func (z zkClient) Contenders(ctx context.Context, path string) ([]zklock.Contender, error) {
	return z.c.Contenders(ctx, path)
}

func (z zkClient) Close() error { return z.c.Close() }

// TestConformanceZooKeeper runs the suite that keeps zklocktest honest
// against real ZooKeeper: every behaviour the fake claims holds here too
// (zklocktest's TestConformance runs the same suite against the fake).
func TestConformanceZooKeeper(t *testing.T) {
	t.Parallel()
	obs := observer(t)
	conformance.Run(t, conformance.Harness{
		NewClient: func(t *testing.T) conformance.Client {
			proxy := zktest.NewProxy(t, cluster.Addrs()...)
			c := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(conformanceSession))
			return zkClient{c, proxy}
		},
		Lose: func(t *testing.T, l *zklock.Lease) {
			require.NoError(t, obs.Delete(l.Node(), -1))
		},
		Expire: func(t *testing.T, c conformance.Client, l *zklock.Lease) {
			proxy := c.(zkClient).proxy
			proxy.Stall()
			waitGone(t, obs, l.Node()) // the server expired the session
			proxy.Resume()
		},
	})
}
