package zktest_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock/zktest"
)

// TestReconfigAddsAndRemovesServers: a server added with a reconfig is in
// /zookeeper/config with its client address and in Addrs; a removed one is
// in neither, and the ensemble serves without it.
func TestReconfigAddsAndRemovesServers(t *testing.T) {
	c := zktest.Start(t, zktest.WithEnsemble(3), zktest.WithReconfig())
	c.SkipIfExternal(t)
	added, err := c.AddServer(ctxT(t, 2*time.Minute))
	require.NoError(t, err)
	require.Equal(t, 4, added.ID())
	require.NoError(t, c.RemoveServer(ctxT(t, 2*time.Minute), 0))
	require.Equal(t, []string{c.Servers()[1].Addr(), c.Servers()[2].Addr(), added.Addr()}, c.Addrs())

	cli := zktest.Connect(t, []string{added.Addr()}, 10*time.Second)
	_, err = cli.Sync("/")
	require.NoError(t, err)
	data, _, err := cli.Get("/zookeeper/config")
	require.NoError(t, err)
	cfg := string(data)
	require.Contains(t, cfg, "server.4=127.0.0.1:")
	require.Contains(t, cfg, ";"+added.Addr())
	require.NotContains(t, cfg, "server.1=")
	require.Equal(t, 3, strings.Count(cfg, "server."), cfg)
}

// TestReplaceServerKeepsItsAddress: a member removed, wiped and added back
// at the same address is in /zookeeper/config again and serves what was
// written while it was out.
func TestReplaceServerKeepsItsAddress(t *testing.T) {
	c := zktest.Start(t, zktest.WithEnsemble(3), zktest.WithReconfig())
	c.SkipIfExternal(t)
	addrs := c.Addrs()
	leader, err := c.Leader()
	require.NoError(t, err)
	require.NoError(t, c.ReplaceServer(ctxT(t, 2*time.Minute), leader))
	require.Equal(t, addrs, c.Addrs())

	cli := zktest.Connect(t, []string{addrs[leader]}, 10*time.Second)
	_, err = cli.Sync("/")
	require.NoError(t, err)
	data, _, err := cli.Get("/zookeeper/config")
	require.NoError(t, err)
	require.Contains(t, string(data), fmt.Sprintf("server.%d=", leader+1))
	require.Equal(t, 3, strings.Count(string(data), "server."), string(data))
}
