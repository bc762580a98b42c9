package zklock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// A server cut off from the other servers while its clients still reach it
// (lesson 39): a follower goes on answering its clients' pings and reads for
// up to syncLimit × tickTime (S), while the leader, hearing nothing of their
// sessions, expires them on its own clock and grants the next waiter. A
// holder H connected only to that server must see its lease end (Done)
// before a waiter W on another server is granted, with default options.
//
// make test runs the configurations below; ZKLOCK_PARTITION_ALL=1 runs the
// whole matrix of issue 38 (a few minutes).

// partitionCase is one configuration: the servers' tick (syncLimit is 5:
// S = 5 ticks), the session timeout, which server is cut off, and when.
type partitionCase struct {
	tick    time.Duration
	timeout time.Duration
	leader  bool // cut the leader off, not a follower
	worst   bool // cut just before H's next ping, not at a random moment
}

func (pc partitionCase) String() string {
	who, when := "follower", "random"
	if pc.leader {
		who = "leader"
	}
	if pc.worst {
		when = "worst"
	}
	return fmt.Sprintf("T%v/%s/%s", pc.timeout, who, when)
}

func partitionCases() map[time.Duration][]partitionCase {
	quick := map[time.Duration][]partitionCase{
		200 * time.Millisecond: {
			{timeout: 2 * time.Second, worst: true},
			{timeout: 3 * time.Second},
			{timeout: 2 * time.Second, leader: true},
		},
		500 * time.Millisecond: {
			{timeout: 2 * time.Second, worst: true}, // S = 2.5 s > T
			{timeout: 2 * time.Second, leader: true, worst: true},
		},
	}
	if os.Getenv("ZKLOCK_PARTITION_ALL") == "" {
		return quick
	}
	all := map[time.Duration][]partitionCase{}
	for tick, timeouts := range map[time.Duration][]time.Duration{
		200 * time.Millisecond: {2 * time.Second, 3 * time.Second, 5 * time.Second, 8 * time.Second, 10 * time.Second},
		500 * time.Millisecond: {2 * time.Second, 8 * time.Second},
	} {
		for _, T := range timeouts {
			for _, leader := range []bool{false, true} {
				for _, worst := range []bool{false, true} {
					all[tick] = append(all[tick], partitionCase{timeout: T, leader: leader, worst: worst})
				}
			}
		}
	}
	return all
}

func TestPartitionedServerNeverTwoHolders(t *testing.T) {
	t.Parallel()
	for tick, cases := range partitionCases() {
		t.Run(fmt.Sprintf("tick%v", tick), func(t *testing.T) {
			zc := zktest.Start(t, zktest.WithEnsemble(3), zktest.WithTickTime(tick), zktest.WithPartitions())
			for _, pc := range cases {
				pc.tick = tick
				t.Run(pc.String(), func(t *testing.T) { partitionOnce(t, zc, pc) })
			}
		})
	}
}

// partitionOnce runs one configuration: H holds through the victim only, W
// waits through another server, the victim is cut off, and W's grant must
// come after H's Done closed. The cluster is healed afterwards.
func partitionOnce(t *testing.T, zc *zktest.Cluster, pc partitionCase) {
	ctx := ctxTimeout(t, 2*time.Minute)
	require.NoError(t, zc.WaitHealthy(ctx))
	victim, other := partitionPair(t, zc, pc.leader)
	addrs := zc.Addrs()
	px := zktest.NewProxy(t, addrs[victim]) // H's only way in; its bytes show H's pings
	h := connectVia(t, []string{px.Addr()}, zklock.WithSessionTimeout(pc.timeout))
	w := connectVia(t, []string{addrs[other]}, zklock.WithSessionTimeout(pc.timeout))
	p := lockPath(t)
	held, err := mustMutex(t, h, p).Acquire(ctx)
	require.NoError(t, err)
	granted := make(chan time.Time, 1)
	go func() {
		l, err := mustMutex(t, w, p).Acquire(ctx)
		if err == nil {
			granted <- time.Now()
			_ = l.Release(context.Background())
		}
		close(granted)
	}()
	eventually(t, "W queued", func() bool {
		cs, err := h.Contenders(ctx, p)
		return err == nil && len(cs) == 2
	})
	cutAt := cutWhen(t, px, pc)
	require.NoError(t, zc.Partition(victim))
	t.Cleanup(func() { _ = zc.Heal(victim) })
	var doneAt, grantAt time.Time
	done, grants := held.Done(), (<-chan time.Time)(granted)
	for doneAt.IsZero() || grantAt.IsZero() {
		select {
		case <-done:
			doneAt, done = time.Now(), nil
		case at, ok := <-grants:
			require.True(t, ok, "W's Acquire failed")
			grantAt, grants = at, nil
		case <-ctx.Done():
			t.Fatalf("neither H's loss nor W's grant within the test's bound (Done %v, grant %v)", doneAt, grantAt)
		}
	}
	t.Logf("cut %v: H's Done %v after the cut, W granted %v after it (margin %v)",
		cutAt.Format("15:04:05.000"), doneAt.Sub(cutAt), grantAt.Sub(cutAt), grantAt.Sub(doneAt))
	require.True(t, doneAt.Before(grantAt), "two holders: W was granted %v before H's Done closed", doneAt.Sub(grantAt))
	require.NoError(t, zc.Heal(victim))
}

// partitionPair picks the server to cut off (the leader, or a follower) and
// another one for W.
func partitionPair(t *testing.T, zc *zktest.Cluster, leader bool) (victim, other int) {
	t.Helper()
	l, err := zc.Leader()
	require.NoError(t, err)
	follower := (l + 1 + rand.IntN(2)) % 3
	if leader {
		return l, follower
	}
	return follower, l
}

// cutWhen waits for the moment to cut: right after H's traffic, plus a
// random part of a ping interval, or (worst) a ping interval less a little,
// so that the cut-off server answers H's next ping.
func cutWhen(t *testing.T, px *zktest.Proxy, pc partitionCase) time.Time {
	t.Helper()
	before, _ := px.Bytes()
	eventuallyWithin(t, pc.timeout, "H's next request", func() bool {
		now, _ := px.Bytes()
		return now > before
	})
	wait := time.Duration(rand.Int64N(int64(pc.timeout / 3)))
	if pc.worst {
		wait = pc.timeout/3 - pc.timeout/30
	}
	time.Sleep(wait) // the phase is the thing varied
	return time.Now()
}
