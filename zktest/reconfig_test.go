package zktest_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock/zktest"
)

// TestReconfigAddsRemovesAndReplacesServers: a server added with a
// reconfig is in /zookeeper/config with its client address and in Addrs; a
// removed one is in neither, and the ensemble serves without it; the leader
// replaced (removed, wiped, added back) keeps its address and is a member
// again.
func TestReconfigAddsRemovesAndReplacesServers(t *testing.T) {
	c := zktest.Start(t, zktest.WithEnsemble(3), zktest.WithReconfig())
	c.SkipIfExternal(t)
	added, err := c.AddServer(ctxT(t, 2*time.Minute))
	require.NoError(t, err)
	require.Equal(t, 4, added.ID())
	require.NoError(t, c.RemoveServer(ctxT(t, 2*time.Minute), 0))
	members := []string{c.Servers()[1].Addr(), c.Servers()[2].Addr(), added.Addr()}
	require.Equal(t, members, c.Addrs())
	cfg := configOf(t, added.Addr())
	require.Contains(t, cfg, "server.4=127.0.0.1:")
	require.Contains(t, cfg, ";"+added.Addr())
	require.NotContains(t, cfg, "server.1=")
	require.Equal(t, 3, strings.Count(cfg, "server."), cfg)

	leader, err := c.Leader()
	require.NoError(t, err)
	require.NoError(t, c.ReplaceServer(ctxT(t, 2*time.Minute), leader))
	require.Equal(t, members, c.Addrs())
	cfg = configOf(t, c.Servers()[leader].Addr())
	require.Contains(t, cfg, fmt.Sprintf("server.%d=", leader+1))
	require.Equal(t, 3, strings.Count(cfg, "server."), cfg)
}

// configOf reads /zookeeper/config through the server at addr, synced.
func configOf(t *testing.T, addr string) string {
	cli := zktest.Connect(t, []string{addr}, 10*time.Second)
	_, err := cli.Sync("/")
	require.NoError(t, err)
	data, _, err := cli.Get("/zookeeper/config")
	require.NoError(t, err)
	return string(data)
}
