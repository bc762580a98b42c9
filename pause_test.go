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

// A server that pauses (a GC pause, a frozen VM: SIGSTOP, then SIGCONT) is
// not a server cut off: the session it serves lives on, and a lease on it
// must too, as long as the pause stays below the bound docs/guarantees.md
// states: 0.4 T, T the granted session timeout (the leader's word is at
// most 0.375 T and a few round trips old while a lease is held, and a lease
// is trusted for 0.8 T from it). A longer pause may end the lease (the
// client cannot tell it from a cut), but always before anyone else is
// granted the lock.
//
// The ensemble's syncLimit (2 s) is above every pause here, so the
// followers keep the paused leader and no election hides what is measured.

func pauseEnsemble(t *testing.T) *zktest.Cluster {
	return zktest.Start(t, zktest.WithEnsemble(3), zktest.WithSyncLimit(20))
}

// steadyDeadline is how far a held lease's deadline always is while the
// keep-alive proves its word every quarter gap (0.8 T less 1.25 gaps, less a
// little for round trips): the state in which the bound holds.
func steadyDeadline(T time.Duration) time.Duration { return T * 41 / 100 }

// Pauses below the bound, at a random phase, of the leader or of the
// holder's own server, at two session timeouts: one lease each lives
// through all of them.
//
// The bound holds while round trips and timer lateness stay under 0.025 T
// (50 ms at 2 s), which a machine busy with other tests' clients and servers
// exceeds: `make test` runs this test alone, after the others (measured
// beside them: a 0.32 T pause left 112 ms of trust, and the keep-alive's
// answer came later). Its two halves side by side, each on an ensemble of
// its own, failed too, at T of 3 s and 4 s: it runs on one ensemble, one
// half after the other, as written.
func TestServerPauseBelowTheBoundEndsNoLease(t *testing.T) {
	zc := pauseEnsemble(t)
	servers := zc.Servers()
	for T, pauses := range map[time.Duration]int{2 * time.Second: 10, 3 * time.Second: 6} {
		t.Run(fmt.Sprintf("T%v", T), func(t *testing.T) {
			ctx := ctxTimeout(t, 2*time.Minute)
			// How long the word may take to be fresh again after a pause: a
			// proof gap or two unloaded; much longer when the CPU is shared.
			freshAgain := max(2*T, 15*time.Second)
			require.NoError(t, zc.WaitHealthy(ctx))
			leader, err := zc.Leader()
			require.NoError(t, err)
			at := (leader + 1 + rand.IntN(2)) % 3 // the holder's server: a follower
			h := connectVia(t, []string{zc.Addrs()[at]}, zklock.WithSessionTimeout(T))
			l, err := mustMutex(t, h, lockPath(t)).Acquire(ctx)
			require.NoError(t, err)
			var ended time.Time // the last pause's end
			for i := range pauses {
				victim := leader
				if rand.IntN(3) == 0 {
					victim = at
				}
				// The bound is for a lease whose word is as fresh as the
				// keep-alive keeps it: after a pause, the answers around it
				// are proven a proof gap or two later.
				waitFresh(t, l, T, ended, freshAgain)
				time.Sleep(time.Duration(rand.Int64N(int64(T * 3 / 40)))) // the phase against the keep-alive's syncs
				// Below the bound by round trips and a loaded machine's
				// timer lateness: 0.2-0.33 T.
				d := time.Duration((0.2 + 0.13*rand.Float64()) * float64(T))
				require.NoError(t, servers[victim].Pause(ctx, d))
				ended = time.Now()
				require.NoError(t, l.Err(), "pause %d: %v (%.2f T) of server %d (leader: %v) ended the lease",
					i, d, float64(d)/float64(T), victim, victim == leader)
				t.Logf("pause %d: %v (%.2f T) of server %d (leader: %v): held, deadline in %v", i, d.Round(time.Millisecond),
					float64(d)/float64(T), victim, victim == leader, time.Until(l.Deadline()).Round(time.Millisecond))
			}
			waitFresh(t, l, T, ended, freshAgain)
			require.NoError(t, l.Release(ctx))
		})
	}
}

// waitFresh waits until l's word is as fresh as the keep-alive keeps it
// (the state the bound is for), and fails at once if l ended meanwhile.
// A deadline far off just after a pause is not that state: the answers
// around the pause are proven only a proof gap later, so the word stays
// old until about 0.6 T after the pause ended (docs/guarantees.md: two
// pauses closer than that count as one). Measured: a 0.21 T pause of the
// leader left 0.5 T of trust, and a 0.25 T pause of the holder's server
// 0.1 T after it ended the lease, as the docs say it may.
func waitFresh(t *testing.T, l *zklock.Lease, T time.Duration, pauseEnded time.Time, within time.Duration) {
	t.Helper()
	eventuallyWithin(t, within, "the leader's word fresh again", func() bool {
		require.NoError(t, l.Err(), "the lease ended between pauses")
		return time.Since(pauseEnded) >= T*6/10 && time.Until(l.Deadline()) >= steadyDeadline(T)
	})
}

// Pauses of the leader above the bound (and below the session timeout): the
// lease may end, and if it does, before the waiter is granted.
func TestServerPauseAboveTheBoundEndsTheLeaseFirst(t *testing.T) {
	t.Parallel()
	zc := pauseEnsemble(t)
	servers := zc.Servers()
	const T = 2 * time.Second
	for i := range 3 {
		ctx := ctxTimeout(t, time.Minute)
		require.NoError(t, zc.WaitHealthy(ctx))
		leader, err := zc.Leader()
		require.NoError(t, err)
		f1, f2 := (leader+1)%3, (leader+2)%3
		h := connectVia(t, []string{zc.Addrs()[f1]}, zklock.WithSessionTimeout(T))
		w := connectVia(t, []string{zc.Addrs()[f2]}, zklock.WithSessionTimeout(T))
		p := lockPath(t)
		held, err := mustMutex(t, h, p).Acquire(ctx)
		require.NoError(t, err)
		granted, failed := make(chan time.Time, 1), make(chan error, 1)
		go func() {
			defer close(granted)
			l, err := mustMutex(t, w, p).Acquire(ctx)
			if err != nil {
				failed <- err
				return
			}
			granted <- time.Now()
			_ = l.Release(context.Background())
		}()
		eventually(t, "W queued", func() bool {
			cs, err := h.Contenders(ctx, p)
			return err == nil && len(cs) == 2
		})
		// The connect proved the session at once; a pause is judged once the
		// word is as old as the keep-alive lets it grow (at most 0.5 T of
		// trust left), so that 0.6 T must end the lease.
		eventuallyWithin(t, 2*T, "the connect's proof aged", func() bool {
			return time.Until(held.Deadline()) <= T*55/100
		})
		ended := make(chan leaseEnd, 1)
		go watchEnd(ctx, held, ended)
		d := time.Duration((0.6 + 0.3*rand.Float64()) * float64(T))
		require.NoError(t, servers[leader].Pause(ctx, d))
		end, ok := <-ended
		require.True(t, ok, "a pause of %v (%.2f T) did not end the lease", d, float64(d)/float64(T))
		grantAt, ok := <-granted
		if !ok {
			t.Fatalf("W's Acquire failed: %v", <-failed)
		}
		require.True(t, end.at.Before(grantAt), "two holders: W granted %v before H's Done", end.at.Sub(grantAt))
		// H's node stays until its session may have expired (T after the
		// leader's last word, 0.2 T after the deadline): H's time to stop.
		require.False(t, grantAt.Before(end.deadline.Add(T/5)),
			"W granted %v after H's deadline, within H's last 0.2 T", grantAt.Sub(end.deadline))
		t.Logf("pause %d: %v (%.2f T): H's Done %v before W's grant, %v after its deadline", i, d.Round(time.Millisecond),
			float64(d)/float64(T), grantAt.Sub(end.at).Round(time.Millisecond), grantAt.Sub(end.deadline).Round(time.Millisecond))
		require.NoError(t, h.Close())
		require.NoError(t, w.Close())
	}
}

// leaseEnd is when a lease ended, and its last deadline while it held.
type leaseEnd struct{ at, deadline time.Time }

// watchEnd follows l's deadline until l ends, then sends the end on ended
// (closed either way, with nothing sent if ctx ends first).
func watchEnd(ctx context.Context, l *zklock.Lease, ended chan<- leaseEnd) {
	defer close(ended)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var last time.Time
	for {
		select {
		case <-l.Done():
			ended <- leaseEnd{time.Now(), last}
			return
		case <-tick.C:
			if d := l.Deadline(); l.Err() == nil && d.After(last) {
				last = d // read while it held: a true deadline
			}
		case <-ctx.Done():
			return
		}
	}
}
