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

// SetClockShift moves a server's clock from its next Restart; a cluster
// started without a shifted clock refuses one (no libfaketime was sought).
func TestSetClockShift(t *testing.T) {
	c := zktest.Start(t, zktest.WithClockShifts(-time.Hour))
	s := c.Servers()[0]
	require.NoError(t, s.Kill())
	const later = -30 * 24 * time.Hour
	require.NoError(t, s.SetClockShift(later))
	require.NoError(t, s.Restart(ctxT(t, time.Minute)))
	conn := zktest.Connect(t, c.Addrs(), 10*time.Second)
	_, err := conn.Create("/moved", nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	_, stat, err := conn.Get("/moved")
	require.NoError(t, err)
	require.InDelta(t, time.Now().Add(later).UnixMilli(), stat.Ctime, 2000, "the new shift after the restart")

	plain := zktest.Start(t)
	require.Error(t, plain.Servers()[0].SetClockShift(time.Minute))
}
