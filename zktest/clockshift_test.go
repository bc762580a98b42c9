package zktest_test

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock/zktest"
)

// WithClockShifts: a write's time (a node's ctime) is the server's shifted
// clock, before and after a Restart.
func TestClockShifts(t *testing.T) {
	const shift = -7 * time.Minute
	c := zktest.Start(t, zktest.WithClockShifts(shift))
	ctime := func(conn *zktest.Client, path string) time.Time {
		t.Helper()
		_, err := conn.Create(path, nil, 0, zk.WorldACL(zk.PermAll))
		require.NoError(t, err)
		_, stat, err := conn.Get(path)
		require.NoError(t, err)
		return time.UnixMilli(stat.Ctime)
	}
	conn := zktest.Connect(t, c.Addrs(), 10*time.Second)
	require.InDelta(t, time.Now().Add(shift).UnixMilli(), ctime(conn, "/before").UnixMilli(), 2000)
	conn.Close()

	s := c.Servers()[0]
	require.NoError(t, s.Kill())
	require.NoError(t, s.Restart(ctxT(t, time.Minute)))
	conn = zktest.Connect(t, c.Addrs(), 10*time.Second)
	require.InDelta(t, time.Now().Add(shift).UnixMilli(), ctime(conn, "/after").UnixMilli(), 2000, "the shift stays across a restart")
}
