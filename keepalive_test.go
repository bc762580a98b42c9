package zklock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// What the leader's word costs, counted by the server (mntr): a client that
// holds a lease sends a sync about once per proof gap (0.3 T) besides its
// pings (one per T/3); a client that holds nothing and waits for nothing
// sends only its pings.
func TestKeepAliveCost(t *testing.T) {
	zc := zktest.Start(t) // a server of its own: its packet count is this test's
	const session, window = 2 * time.Second, 6 * time.Second
	packets := func(hold bool) int64 {
		c := connectVia(t, zc.Addrs(), zklock.WithSessionTimeout(session))
		if hold {
			l, err := mustMutex(t, c, lockPath(t)).Acquire(ctxTimeout(t, 10*time.Second))
			require.NoError(t, err)
			defer l.Release(context.Background())
		}
		time.Sleep(session) // past the acquisition's own requests
		before, err := zc.Mntr(0)
		require.NoError(t, err)
		time.Sleep(window) // the window is the thing measured
		after, err := zc.Mntr(0)
		require.NoError(t, err)
		require.NoError(t, c.Close())
		return after.PacketsReceived() - before.PacketsReceived() - 1 // less the mntr itself
	}
	idle, holding := packets(false), packets(true)
	pings := int64(window / (session / 3))
	syncs := holding - idle
	t.Logf("in %v with T = %v: idle client %d packets (pings every T/3: %d), holding client %d: %d syncs, %.2f a second (%.1f per T)",
		window, session, idle, pings, holding, syncs, float64(syncs)/window.Seconds(), float64(syncs)*session.Seconds()/window.Seconds())
	require.InDelta(t, pings, idle, 1, "an idle client sends only its pings")
	// One sync per proof gap and round trip, at most two: 10 to 20 in 6 s.
	require.GreaterOrEqual(t, syncs, int64(window/(session*3/10))-2, "the leader's word is kept")
	require.LessOrEqual(t, syncs, 2*int64(window/(session*3/10)), "no more than two syncs a proof gap")
}
