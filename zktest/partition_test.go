package zktest_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock/zktest"
)

// partitionTick is the tickTime of the partition tests; syncLimit is 5
// ticks, so a server hears nothing from its peers for syncLimitS before it
// gives up on them.
const (
	partitionTick = 200 * time.Millisecond
	syncLimitS    = 5 * partitionTick
)

// startPartitionable starts a 3-server ensemble whose servers can be
// partitioned from each other.
func startPartitionable(t *testing.T) *zktest.Cluster {
	t.Helper()
	c := zktest.Start(t, zktest.WithEnsemble(3), zktest.WithTickTime(partitionTick), zktest.WithPartitions())
	require.Empty(t, c.Partitioned())
	return c
}

// others returns the indexes and client addresses of the servers but i.
func others(c *zktest.Cluster, i int) ([]int, []string) {
	var idx []int
	var addrs []string
	for j, a := range c.Addrs() {
		if j != i {
			idx, addrs = append(idx, j), append(addrs, a)
		}
	}
	return idx, addrs
}

// serving reports addr's mode, or "" while it does not serve (an election).
func serving(addr string) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	mode, err := zktest.ServerMode(ctx, addr)
	if err != nil {
		return ""
	}
	return mode
}

// TestPartitionFollower cuts a follower off from the other two servers while
// its clients still reach it (lesson 39): for about syncLimit ticks it goes
// on answering its clients' reads and pings, while their syncs and writes
// hang and the leader expires a session it hears nothing about; then it
// stops serving. The other two keep their leader and serve writes; healed,
// the follower rejoins.
func TestPartitionFollower(t *testing.T) {
	c := startPartitionable(t)
	leader, err := c.Leader()
	require.NoError(t, err)
	f := (leader + 1) % 3
	faddr := c.Addrs()[f]
	_, rest := others(c, f)
	reader := zktest.Connect(t, []string{faddr}, 10*time.Second)
	writer := zktest.Connect(t, []string{faddr}, 10*time.Second)
	majority := zktest.Connect(t, rest, 10*time.Second)
	gone := shortSessionNode(t, faddr, majority)

	require.NoError(t, c.Partition(f))
	cutAt := time.Now()
	require.Equal(t, []int{f}, c.Partitioned())
	syncDone, createDone := make(chan error, 1), make(chan error, 1)
	go func() { _, err := writer.Sync("/"); syncDone <- err }()
	go func() {
		_, err := writer.Create("/through-cut", nil, 0, zk.WorldACL(zk.PermAll))
		createDone <- err
	}()

	// Read through the follower until it stops serving; the duration is
	// what is measured, so this polls.
	var lastRead, expiredAt time.Duration
	readsAfterExpiry, checkedPending := 0, false
	for {
		_, _, err := reader.Exists("/")
		now := time.Since(cutAt)
		if err != nil {
			t.Logf("read through the partitioned follower failed %v after the cut: %v", now, err)
			break
		}
		lastRead = now
		if !checkedPending && now >= syncLimitS/3 {
			// The follower surely still serves (a read just succeeded) and
			// still waits for the leader: the sync and the write hang.
			require.Empty(t, syncDone, "sync through a partitioned follower completed")
			require.Empty(t, createDone, "write through a partitioned follower completed")
			checkedPending = true
		}
		select {
		case ev := <-gone:
			require.Equal(t, zk.EventNodeDeleted, ev.Type)
			expiredAt, gone = now, nil // go-zookeeper closes a watch's channel after its event
		default:
		}
		if expiredAt > 0 {
			readsAfterExpiry++
		}
		require.Less(t, now, 10*syncLimitS, "the partitioned follower never stopped serving")
		time.Sleep(10 * time.Millisecond)
	}
	require.True(t, checkedPending, "no read succeeded %v after the cut", syncLimitS/3)
	require.Greater(t, lastRead, syncLimitS/2)
	require.Less(t, lastRead, syncLimitS+2*time.Second)
	require.NoError(t, reader.WaitState(ctxT(t, 5*time.Second), zk.StateDisconnected))
	require.Error(t, <-syncDone)
	require.Error(t, <-createDone)
	if expiredAt == 0 {
		require.Equal(t, zk.EventNodeDeleted, waitEvent(t, gone, 10*time.Second).Type)
		expiredAt = time.Since(cutAt)
	}
	t.Logf("follower %d answered reads for %v after the cut; the leader expired the %v session after %v; %d reads succeeded after that",
		f, lastRead, 2*partitionTick, expiredAt, readsAfterExpiry)
	// The leader expires a session it hears nothing about (here within 2
	// ticks of the cut), but the follower serves until it misses the
	// leader for syncLimit ticks.
	require.Positive(t, readsAfterExpiry, "the follower stopped serving before the leader expired the session")
	require.Equal(t, "", serving(faddr), "partitioned follower still serving")

	// The other two keep their leader and serve writes.
	require.Equal(t, "leader", serving(c.Addrs()[leader]))
	_, err = majority.Create("/during-cut", nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)

	healAt := time.Now()
	require.NoError(t, c.Heal(f))
	require.Empty(t, c.Partitioned())
	require.NoError(t, c.WaitHealthy(ctxT(t, 30*time.Second)))
	t.Logf("healthy %v after the heal", time.Since(healAt))
	require.Equal(t, "follower", serving(faddr))
	require.NoError(t, reader.WaitState(ctxT(t, 10*time.Second), zk.StateHasSession))
	_, err = reader.Sync("/during-cut")
	require.NoError(t, err)
	ok, _, err := reader.Exists("/during-cut")
	require.NoError(t, err)
	require.True(t, ok)
}

// TestPartitionLeader cuts the leader off from the other two: they elect a
// new leader once their reads from it time out (syncLimit ticks), and the
// old one steps down; healed, it rejoins as a follower.
func TestPartitionLeader(t *testing.T) {
	c := startPartitionable(t)
	old, err := c.Leader()
	require.NoError(t, err)
	idx, rest := others(c, old)
	majority := zktest.Connect(t, rest, 10*time.Second)

	require.NoError(t, c.Partition(old))
	cutAt := time.Now()
	var elected, stepDown time.Duration
	newLeader := -1
	for elected == 0 || stepDown == 0 {
		now := time.Since(cutAt)
		require.Less(t, now, 30*time.Second, "no new leader (%v) or the old one never stepped down (%v)", elected, stepDown)
		if stepDown == 0 && serving(c.Addrs()[old]) != "leader" {
			stepDown = now
		}
		if elected == 0 {
			a, b := serving(rest[0]), serving(rest[1])
			switch {
			case a == "leader" && b == "follower":
				newLeader, elected = idx[0], now
			case b == "leader" && a == "follower":
				newLeader, elected = idx[1], now
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("leader %d partitioned: server %d leads %v after the cut; the old leader stepped down after %v", old, newLeader, elected, stepDown)
	require.Greater(t, elected, syncLimitS/2)
	require.Less(t, elected, 2*syncLimitS+2*time.Second)
	require.Less(t, stepDown, 2*syncLimitS+2*time.Second)
	_, err = majority.Create("/after-election", nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)

	healAt := time.Now()
	require.NoError(t, c.Heal(old))
	require.NoError(t, c.WaitHealthy(ctxT(t, 30*time.Second)))
	t.Logf("healthy %v after the heal", time.Since(healAt))
	require.Equal(t, "follower", serving(c.Addrs()[old]))
	require.Equal(t, "leader", serving(c.Addrs()[newLeader]))
	cli := zktest.Connect(t, []string{c.Addrs()[old]}, 10*time.Second)
	_, err = cli.Sync("/after-election")
	require.NoError(t, err)
	ok, _, err := cli.Exists("/after-election")
	require.NoError(t, err)
	require.True(t, ok)
}

// TestPartitionErrors: Partition and Heal say why they cannot act on a
// cluster started without WithPartitions, on external servers, or on a
// server that does not exist; WithPartitions needs an ensemble.
func TestPartitionErrors(t *testing.T) {
	c := zktest.Start(t)
	c.SkipIfExternal(t)
	require.ErrorIs(t, c.Partition(0), zktest.ErrNoPartitions)
	require.ErrorIs(t, c.Heal(0), zktest.ErrNoPartitions)
	require.Empty(t, c.Partitioned())
	_, _, err := zktest.StartMain(zktest.WithPartitions())
	require.ErrorContains(t, err, "needs an ensemble")

	t.Setenv(zktest.EnvServers, c.Addrs()[0])
	ext, stop, err := zktest.StartMain()
	require.NoError(t, err)
	defer stop()
	require.ErrorIs(t, ext.Partition(0), zktest.ErrExternal)
	_, _, err = zktest.StartMain(zktest.WithPartitions())
	require.ErrorContains(t, err, zktest.EnvServers)
	var sub *testing.T
	t.Run("skips", func(t *testing.T) {
		sub = t
		zktest.Start(t, zktest.WithPartitions())
	})
	require.True(t, sub.Skipped())
}

// TestPartitionProxiesFollowPorts: when start retries on new ports (one was
// taken), the link proxies are replaced to point at the new ones, and they
// outlive a server's Kill and Restart.
//
// Not parallel: the launch hook is the package's, and would run for any
// other test's servers too.
func TestPartitionProxiesFollowPorts(t *testing.T) {
	var stolen net.Listener
	restore := zktest.SetBeforeLaunch(func(addrs []string) {
		if stolen == nil {
			l, err := net.Listen("tcp", addrs[1])
			require.NoError(t, err)
			stolen = l
		}
	})
	defer restore()
	c := startPartitionable(t)
	c.SkipIfExternal(t)
	require.NotNil(t, stolen)
	defer stolen.Close()
	all, current, err := zktest.PartitionProxies(c)
	require.NoError(t, err)
	require.Equal(t, 12, all, "3 servers, 2 peers each, quorum and election")
	require.Equal(t, all, current)

	leader, err := c.Leader()
	require.NoError(t, err)
	s := c.Servers()[leader]
	require.NoError(t, s.Kill())
	require.NoError(t, c.WaitHealthy(ctxT(t, 30*time.Second)))
	require.NoError(t, s.Restart(ctxT(t, 60*time.Second)))
	require.NoError(t, c.WaitHealthy(ctxT(t, 30*time.Second)))
}

// TestPartitionDocExample is the example of docs/testing.md, "Partitioning a
// server", as written there.
func TestPartitionDocExample(t *testing.T) {
	c := zktest.Start(t, zktest.WithEnsemble(3), zktest.WithPartitions())
	leader, err := c.Leader()
	if err != nil {
		t.Fatal(err)
	}
	f := (leader + 1) % 3                                            // a follower
	cli := zktest.Connect(t, []string{c.Addrs()[f]}, 10*time.Second) // to it alone
	if err := c.Partition(f); err != nil {
		t.Fatal(err)
	}
	// The follower still answers reads, for syncLimit (5) ticks...
	if _, _, err := cli.Exists("/"); err != nil {
		t.Fatalf("read right after the cut: %v", err)
	}
	// ...then it stops serving and drops its clients.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cli.WaitState(ctx, zk.StateDisconnected); err != nil {
		t.Fatal(err)
	}
	if err := c.Heal(f); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
}

// shortSessionNode makes an ephemeral node of the shortest session granted
// (0.4 s) through the follower at addr, and watches it from majority. A
// loaded machine (a fresh clone's make test) can let so short a session
// expire before its node is made or seen: then it tries again with a new
// session and a new node, three times at most.
func shortSessionNode(t *testing.T, addr string, majority *zktest.Client) <-chan zk.Event {
	t.Helper()
	for attempt := 1; ; attempt++ {
		short := zktest.Connect(t, []string{addr}, 2*partitionTick)
		node := fmt.Sprintf("/partition-eph-%d", attempt)
		_, err := short.Create(node, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		if err == nil {
			_, err = majority.Sync(node)
		}
		ok := false
		var gone <-chan zk.Event
		if err == nil {
			ok, _, gone, err = majority.ExistsW(node)
		}
		if err == nil && ok {
			return gone
		}
		require.Less(t, attempt, 3, "a 0.4 s session's node was not seen three times: %v", err)
		t.Logf("the 0.4 s session's node %s was not seen (%v); a new session", node, err)
		short.Close()
	}
}
