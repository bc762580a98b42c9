//go:build linux

package zklock_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// The edge of WithBreakOverdue's bound (docs/scheduled-jobs.md, "Whose
// clock, exactly"), measured: a holder stamps its grant under a leader
// whose clock is right; the leader changes to one whose clock reads 3 s
// ahead, beyond the grace (half of the waiter's 2 s session timeout); the
// waiter that queues then breaks the holder 3 s early by real time: at the
// stamp + limit + grace − skew, inside the holder's limit (12 s, so that a
// slow restart of the server, 5 s on a loaded machine, still queues the
// waiter before that moment). One server
// stands for the leader: Kill, SetClockShift and Restart move ZooKeeper's
// time as a leader change does.
func TestBreakOverdueEarlyBySkewBeyondTheGrace(t *testing.T) {
	t.Parallel()
	const skew, limit, session = 3 * time.Second, 12 * time.Second, 2 * time.Second
	zc := zktest.Start(t, zktest.WithClockShifts(time.Millisecond)) // libfaketime on, the clock right
	p := lockPath(t)
	c := connectVia(t, zc.Addrs(), zklock.WithSessionTimeout(session), zklock.WithBreakOverdue())
	require.NoError(t, zklock.EnsureParents(ctxTimeout(t, 5*time.Second), c, p))
	paused := zktest.Connect(t, zc.Addrs(), 30*time.Second) // survives the restart
	rec, err := json.Marshal(zklock.Owner{Host: "paused", PID: 1, Client: "0123456789abcdef", Since: time.Now(), MaxHold: limit, Held: true})
	require.NoError(t, err)
	node, err := paused.Create(p+"/_c_0123456789abcdef0000000000000001-lock-", rec, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	stamped := time.Now() // the stamp's time by the right clock, within a round trip

	srv := zc.Servers()[0]
	require.NoError(t, srv.Kill())
	require.NoError(t, srv.SetClockShift(skew))
	require.NoError(t, srv.Restart(ctxTimeout(t, time.Minute)))
	l, err := mustMutex(t, c, p).Acquire(ctxTimeout(t, 30*time.Second))
	require.NoError(t, err)
	broken := time.Since(stamped)
	_ = l.Release(ctxTimeout(t, 10*time.Second)) // a 2 s session may have lapsed since; the break is what is measured
	// Through zklock's client, which retries across the restart; the raw
	// one may answer "could not connect to a server".
	for _, cs := range contenders(t, c, p) {
		require.NotEqual(t, node, cs.Node, "the holder was not broken")
	}

	grace := session / 2
	t.Logf("broken %v after the stamp: the bound without skew is %v, with %v of skew %v", broken.Round(10*time.Millisecond), limit+grace, skew, limit+grace-skew)
	require.Less(t, broken, limit, "broken inside the holder's limit: early by the skew")
	require.Greater(t, broken, limit+grace-skew-500*time.Millisecond, "no earlier than the bound less the skew")
}
