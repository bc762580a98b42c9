//go:build linux

package zktest_test

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock/zktest"
)

// TestLossDropsAndHeals: every request to the server lost, then every reply
// (one direction at a time), and a four-letter word goes unanswered; after
// Heal it is answered again. Dropped counts the packets lost.
func TestLossDropsAndHeals(t *testing.T) {
	c := zktest.Start(t)
	c.SkipIfExternal(t)
	addr := c.Addrs()[0]
	_, p, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	port, err := strconv.Atoi(p)
	require.NoError(t, err)
	loss := zktest.NewLoss(t)
	for _, dir := range []zktest.Direction{zktest.ToPort, zktest.FromPort} {
		require.NoError(t, loss.Drop(port, dir, 100))
		_, err = zktest.FourLetter(ctxT(t, time.Second), addr, "ruok")
		require.Error(t, err, "direction %d", dir)
		dropped, err := loss.Dropped()
		require.NoError(t, err)
		require.NotZero(t, dropped, "direction %d", dir)
		require.NoError(t, loss.Heal())
		ruok, err := zktest.FourLetter(ctxT(t, 5*time.Second), addr, "ruok")
		require.NoError(t, err)
		require.Equal(t, "imok", ruok)
	}
	require.Error(t, loss.Drop(port, zktest.ToPort, 0), "0 %")
	require.Error(t, loss.Drop(port, zktest.ToPort, 101), "101 %")
}

// TestRestartFromCheckpoint: a server put back to an earlier copy of its
// data has lost what was written after it (a standalone server has no
// leader to catch up from).
func TestRestartFromCheckpoint(t *testing.T) {
	c := zktest.Start(t)
	c.SkipIfExternal(t)
	s := c.Servers()[0]
	cli := zktest.Connect(t, c.Addrs(), 10*time.Second)
	_, err := cli.Create("/before", nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	backup, err := s.Checkpoint()
	require.NoError(t, err)
	_, err = cli.Create("/after", nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)

	require.NoError(t, s.RestartFrom(ctxT(t, time.Minute), backup))
	fresh := zktest.Connect(t, c.Addrs(), 10*time.Second)
	ok, _, err := fresh.Exists("/before")
	require.NoError(t, err)
	require.True(t, ok)
	ok, _, err = fresh.Exists("/after")
	require.NoError(t, err)
	require.False(t, ok, "the write after the checkpoint survived its restore")
	require.Error(t, c.Servers()[0].RestartFrom(ctxT(t, time.Minute), nil))
}
