package zklock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// What the leader's word costs, counted by the server (mntr): a client that
// holds a lease sends a sync about every quarter proof gap (0.075 T, so that
// a pause of the servers below 0.4 T ends no lease) instead of its pings;
// a client that holds nothing and waits for nothing sends only its pings.
//
// Its window's count moves both ways on a busy CPU (late timers; extra
// proofs after slow answers): `make test` runs it alone, after the others.
func TestKeepAliveCost(t *testing.T) {
	const session, window = 2 * time.Second, 6 * time.Second
	packets := func(t *testing.T, hold bool) int64 {
		zc := zktest.Start(t) // a server of its own: its packet count is this client's
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
	var idle, holding int64
	t.Run("windows", func(t *testing.T) { // side by side, each on its own server
		t.Run("idle", func(t *testing.T) { t.Parallel(); idle = packets(t, false) })
		t.Run("holding", func(t *testing.T) { t.Parallel(); holding = packets(t, true) })
	})
	pings := int64(window / (session / 3))
	syncs := holding - idle
	t.Logf("in %v with T = %v: idle client %d packets (pings every T/3: %d), holding client %d: %d syncs, %.2f a second (%.1f per T)",
		window, session, idle, pings, holding, syncs, float64(syncs)/window.Seconds(), float64(syncs)*session.Seconds()/window.Seconds())
	require.InDelta(t, pings, idle, 1, "an idle client sends only its pings")
	// One sync per quarter proof gap and round trip, and no ping (a ping
	// goes only after T/3 with nothing sent): at most 40 packets in 6 s,
	// and more than one per third of a gap (a waiter's cadence is half a gap).
	gap := session * 3 / 10
	require.GreaterOrEqual(t, holding, int64(window/(gap/3)), "a holder's cadence is a quarter gap")
	require.LessOrEqual(t, holding, int64(window/(gap/4))+2, "no more than a sync per quarter gap")
}

// A client that takes a lock now and then for a moment sends no sync: the
// keep-alive waits an eighth of a proof gap after demand rises, and each
// acquisition's create proves what a sync would. Counted with mntr: four
// short cycles on one path after quiet spells cost what the cycles cost
// with no keep-alive at all (create, listing, delete; the own-node read
// too until the path is expected to hold at once), plus the pings. With a
// sync at each rise of demand they cost 4 more (measured: 23 packets, 19
// now).
func TestKeepAliveBriefHoldsSendNoSync(t *testing.T) {
	zc := zktest.Start(t)
	const session = 2 * time.Second
	// No cleaner: it would remove the path between cycles and count too.
	c := connectVia(t, zc.Addrs(), zklock.WithSessionTimeout(session), zklock.WithCleanupDelay(0))
	p := lockPath(t)
	cycle := func() {
		l, err := mustMutex(t, c, p).Acquire(ctxTimeout(t, 10*time.Second))
		require.NoError(t, err)
		require.NoError(t, l.Release(context.Background()))
	}
	cycle() // the path's parents exist from now on
	time.Sleep(session)
	before, err := zc.Mntr(0)
	require.NoError(t, err)
	start := time.Now()
	const cycles = 4
	for range cycles {
		cycle()
		time.Sleep(session / 2) // a quiet spell longer than the proof gap: the duration is the thing varied
	}
	after, err := zc.Mntr(0)
	require.NoError(t, err)
	pings := int64(time.Since(start)/(session/3)) + 1
	got := after.PacketsReceived() - before.PacketsReceived() - 1 // less the mntr itself
	t.Logf("%d cycles after quiet spells: %d packets (pings about %d)", cycles, got, pings)
	require.LessOrEqual(t, got, pings+3*cycles+2, "a sync was sent for a brief hold")
}

// A lease granted after a quiet spell (the client held and awaited nothing,
// so only its pings were answered, and no sync proved them) or after a long
// wait in the queue is not presumed lost: the grant's create proves the
// pings answered a proof gap before it, and the keep-alive proves the rest
// before the deadline. Eight clients at random phases of their pings.
func TestKeepAliveGrantAfterQuietSpellHolds(t *testing.T) {
	t.Parallel()
	// 2 s: the leader's word may be 0.6 T and three round trips old between
	// proofs, so 1 s leaves a loaded test machine 0.2 s for them.
	const session = 2 * time.Second
	hold := func(t *testing.T, c *zklock.Client, l *zklock.Lease) {
		select {
		case <-l.Done():
			t.Fatalf("lease presumed lost while the server answered: %v", l.Err())
		case <-time.After(3 * session):
		}
		require.NoError(t, l.Release(context.Background()))
	}
	for i := range 8 {
		t.Run(fmt.Sprint("quiet", i), func(t *testing.T) {
			t.Parallel()
			c := connect(t, zklock.WithSessionTimeout(session))
			time.Sleep(session + time.Duration(rand.Int64N(int64(session)))) // the phase is the thing varied
			l, err := mustMutex(t, c, lockPath(t)).Acquire(ctxTimeout(t, time.Minute))
			require.NoError(t, err)
			hold(t, c, l)
		})
	}
	t.Run("queued", func(t *testing.T) {
		t.Parallel()
		p := lockPath(t)
		ctx := ctxTimeout(t, time.Minute) // the subtest's own: it may start long after its parent
		h, w := connect(t, zklock.WithSessionTimeout(session)), connect(t, zklock.WithSessionTimeout(session))
		first, err := mustMutex(t, h, p).Acquire(ctx)
		require.NoError(t, err)
		go func() {
			time.Sleep(3 * session) // W waits this long in the queue
			_ = first.Release(context.Background())
		}()
		l, err := mustMutex(t, w, p).Acquire(ctx)
		require.NoError(t, err)
		hold(t, w, l)
	})
}

// Lease.Deadline says until when a holder may rely on its lease: it lies
// within 80 % of the timeout, moves forward while the leader's word is kept,
// stops when the client is cut off, and the lease ends by it; it is in the
// past once the lease has ended.
func TestLeaseDeadlineFollowsTheLeadersWord(t *testing.T) {
	t.Parallel()
	const session = 2 * time.Second
	_, proxy, l, _ := stalledHolder(t, session)
	first := l.Deadline()
	require.True(t, first.After(time.Now()), "a held lease's deadline is ahead")
	require.True(t, first.Before(time.Now().Add(session*8/10)), "and within 80 %% of the timeout")
	time.Sleep(session) // the keep-alive proves contact meanwhile: the duration is the thing tested
	moved := l.Deadline()
	require.True(t, moved.After(first), "the deadline moves forward while contact is proven (%v, then %v)", first, moved)
	proxy.Stall()
	defer proxy.Resume()
	stalled := l.Deadline()
	select {
	case <-l.Done():
		require.False(t, time.Now().Before(stalled.Add(-100*time.Millisecond)), "the lease ended %v before its deadline", time.Until(stalled))
		require.Less(t, time.Since(stalled), boundSlack, "the lease ended long after its deadline")
	case <-time.After(session + boundSlack):
		t.Fatal("the cut-off lease did not end")
	}
	require.True(t, l.Deadline().Before(time.Now()), "an ended lease's deadline is past")
}
