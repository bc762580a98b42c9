package zktest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/zklock/zklock/zktest"
)

// TestMain fails the run if any goroutine (ours: proxy pumps, log readers,
// process waiters; go-zookeeper's connection loops) outlives the tests.
// No goroutines are ignored: Client.Close and the cluster cleanup end them
// all, and goleak retries long enough for go-zookeeper's loop to notice the
// close.
//
// The tests run one at a time: most start servers of their own, and JVMs
// started side by side on a 2-core machine made the package 3 times slower
// (42 s alone, 144 s with four at once).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func mntr(t *testing.T, c *zktest.Cluster, i int) zktest.Mntr {
	t.Helper()
	m, err := c.Mntr(i)
	require.NoError(t, err)
	return m
}

// waitEvent waits for one watch event, bounded.
func waitEvent(t *testing.T, ch <-chan zk.Event, d time.Duration) zk.Event {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(d):
		t.Fatalf("no watch event within %v", d)
		return zk.Event{}
	}
}

func TestMntrParsing(t *testing.T) {
	m := zktest.ParseMntr("zk_version\t3.8.0\nzk_avg_latency\t1.75\nzk_znode_count\t5\nzk_server_state\tstandalone\n")
	require.Equal(t, int64(5), m.ZnodeCount())
	require.Equal(t, int64(1), m.Int("zk_avg_latency"))
	require.Equal(t, int64(0), m.Int("zk_missing"))
	require.Equal(t, int64(0), m.Int("zk_version"))
	require.Equal(t, "standalone", m.State())

	before := zktest.Mntr{"zk_sum_node_deleted_watch_count": "2", "zk_sum_node_changed_watch_count": "1"}
	after := zktest.Mntr{
		"zk_sum_node_deleted_watch_count":  "3",
		"zk_sum_node_changed_watch_count":  "1",
		"zk_sum_node_created_watch_count":  "1",
		"zk_sum_node_children_watch_count": "4",
	}
	require.Equal(t, int64(6), zktest.WatchEventsFired(before, after))
}

func TestMissingInstallExplainsHowToGetOne(t *testing.T) {
	t.Setenv(zktest.EnvServers, "")
	t.Setenv("ZOOKEEPER_HOME", t.TempDir()) // no jars in it
	_, _, err := zktest.StartMain()
	require.Error(t, err)
	for _, want := range []string{"make test", "scripts/install-zookeeper.sh", zktest.EnvServers} {
		require.Contains(t, err.Error(), want)
	}
}

// TestStandalone checks that mntr reflects client actions exactly, and that a
// stopped and restarted server keeps its data and its sessions.
func TestStandalone(t *testing.T) {
	c := zktest.Start(t)
	c.SkipIfExternal(t) // exact counts and Stop/Restart need our own server
	require.Len(t, c.Addrs(), 1)
	require.True(t, strings.HasPrefix(c.Addrs()[0], "127.0.0.1:"))
	leader, err := c.Leader()
	require.NoError(t, err)
	require.Equal(t, 0, leader)

	ruok, err := zktest.FourLetter(ctxT(t, 5*time.Second), c.Addrs()[0], "ruok")
	require.NoError(t, err)
	require.Equal(t, "imok", ruok)

	cli := zktest.Connect(t, c.Addrs(), 20*time.Second)

	m0 := mntr(t, c, 0)
	require.Equal(t, "standalone", m0.State())
	_, err = cli.Create("/persist", []byte("v1"), 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	m1 := mntr(t, c, 0)
	require.Equal(t, m0.ZnodeCount()+1, m1.ZnodeCount())
	require.Equal(t, m0.EphemeralsCount(), m1.EphemeralsCount())
	require.Greater(t, m1.PacketsReceived(), m0.PacketsReceived())

	_, err = cli.Create("/eph", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	m2 := mntr(t, c, 0)
	require.Equal(t, m1.ZnodeCount()+1, m2.ZnodeCount())
	require.Equal(t, m1.EphemeralsCount()+1, m2.EphemeralsCount())

	// One data watch and one child watch, each fired once.
	_, _, dataW, err := cli.GetW("/persist")
	require.NoError(t, err)
	_, _, childW, err := cli.ChildrenW("/")
	require.NoError(t, err)
	m3 := mntr(t, c, 0)
	require.Equal(t, m2.WatchCount()+2, m3.WatchCount())
	_, err = cli.Set("/persist", []byte("v2"), -1)
	require.NoError(t, err)
	require.Equal(t, zk.EventNodeDataChanged, waitEvent(t, dataW, 5*time.Second).Type)
	_, err = cli.Create("/other", nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	require.Equal(t, zk.EventNodeChildrenChanged, waitEvent(t, childW, 5*time.Second).Type)
	m4 := mntr(t, c, 0)
	require.Equal(t, int64(2), zktest.WatchEventsFired(m3, m4))
	require.Equal(t, m2.WatchCount(), m4.WatchCount())

	// Stop + Restart: data survives; the session too, being shorter than
	// its timeout, so the client reconnects without expiry.
	s := c.Servers()[0]
	addr := s.Addr()
	require.NoError(t, s.Stop())
	require.False(t, s.Running())
	require.NoError(t, cli.WaitState(ctxT(t, 10*time.Second), zk.StateDisconnected))
	require.NoError(t, s.Restart(ctxT(t, 60*time.Second)))
	require.True(t, s.Running())
	require.Equal(t, addr, s.Addr())
	require.NoError(t, cli.WaitState(ctxT(t, 15*time.Second), zk.StateHasSession))
	require.NotContains(t, cli.States(), zk.StateExpired)
	data, _, err := cli.Get("/persist")
	require.NoError(t, err)
	require.Equal(t, "v2", string(data))
	ok, _, err := cli.Exists("/eph")
	require.NoError(t, err)
	require.True(t, ok, "ephemeral of a live session survives a restart")

	// Kill + Restart works too.
	require.NoError(t, s.Kill())
	require.False(t, s.Running())
	require.NoError(t, s.Restart(ctxT(t, 60*time.Second)))
	require.NoError(t, c.WaitHealthy(ctxT(t, 10*time.Second)))
	require.Equal(t, m4.ZnodeCount(), mntr(t, c, 0).ZnodeCount())
}

// TestEnsembleLeaderFailover kills the leader of a 3-server ensemble: the
// other two elect a new leader and keep serving; the old leader rejoins.
func TestEnsembleLeaderFailover(t *testing.T) {
	start := time.Now()
	c := zktest.Start(t, zktest.WithEnsemble(3))
	t.Logf("3-server ensemble healthy after %v", time.Since(start))
	c.SkipIfExternal(t)
	require.Len(t, c.Addrs(), 3)

	old, err := c.Leader()
	require.NoError(t, err)
	states := map[string]int{}
	for i := range c.Servers() {
		states[mntr(t, c, i).State()]++
	}
	require.Equal(t, map[string]int{"leader": 1, "follower": 2}, states)

	cli := zktest.Connect(t, c.Addrs(), 10*time.Second)
	_, err = cli.Create("/before", []byte("x"), 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)

	killedAt := time.Now()
	require.NoError(t, c.Servers()[old].Kill())
	require.NoError(t, c.WaitHealthy(ctxT(t, 30*time.Second)))
	nl, err := c.Leader()
	require.NoError(t, err)
	require.NotEqual(t, old, nl)
	t.Logf("new leader %d (was %d) after %v", nl, old, time.Since(killedAt))

	var rest []string
	for i, a := range c.Addrs() {
		if i != old {
			rest = append(rest, a)
		}
	}
	cli2 := zktest.Connect(t, rest, 10*time.Second)
	_, err = cli2.Create("/after", []byte("y"), 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	data, _, err := cli2.Get("/before")
	require.NoError(t, err)
	require.Equal(t, "x", string(data))

	// The old leader comes back on the same ports as a follower and catches up.
	require.NoError(t, c.Servers()[old].Restart(ctxT(t, 60*time.Second)))
	require.NoError(t, c.WaitHealthy(ctxT(t, 30*time.Second)))
	require.Equal(t, "follower", mntr(t, c, old).State())
	cli3 := zktest.Connect(t, []string{c.Addrs()[old]}, 10*time.Second)
	_, err = cli3.Sync("/after")
	require.NoError(t, err)
	ok, _, err := cli3.Exists("/after")
	require.NoError(t, err)
	require.True(t, ok)
}

// TestObserver starts 3 voters and 1 observer: the fourth server reports
// observer mode, and a write sent through it is visible on a voter.
func TestObserver(t *testing.T) {
	c := zktest.Start(t, zktest.WithEnsemble(3), zktest.WithObservers(1))
	require.Len(t, c.Addrs(), 4, "Addrs lists the observer too")
	servers := c.Servers()
	for i, s := range servers {
		require.Equal(t, i == 3, s.Observer(), "server %d", i)
	}
	require.Equal(t, "observer", mntr(t, c, 3).State())
	states := map[string]int{}
	for i := range 3 {
		states[mntr(t, c, i).State()]++
	}
	require.Equal(t, map[string]int{"leader": 1, "follower": 2}, states)

	obs := zktest.Connect(t, []string{c.Addrs()[3]}, 10*time.Second)
	_, err := obs.Create("/through-observer", []byte("o"), 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	voter := zktest.Connect(t, []string{c.Addrs()[0]}, 10*time.Second)
	_, err = voter.Sync("/through-observer")
	require.NoError(t, err)
	data, _, err := voter.Get("/through-observer")
	require.NoError(t, err)
	require.Equal(t, "o", string(data))
	require.NoError(t, c.WaitHealthy(ctxT(t, 10*time.Second)))
}

// TestProxyStallExpiresSession stalls a client's connection past its session
// timeout: the server expires the session (its ephemeral goes), and the
// client learns it once the stall ends.
func TestProxyStallExpiresSession(t *testing.T) {
	c := zktest.Start(t) // tick 100ms: 1s sessions are allowed
	p := zktest.NewProxy(t, c.Addrs()...)
	cli := zktest.Connect(t, []string{p.Addr()}, time.Second)
	sid := cli.SessionID()
	_, err := cli.Create("/stall-eph", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)

	observer := zktest.Connect(t, c.Addrs(), 10*time.Second)
	ok, _, gone, err := observer.ExistsW("/stall-eph")
	require.NoError(t, err)
	require.True(t, ok)

	p.Stall()
	stalledAt := time.Now()
	require.NoError(t, cli.WaitState(ctxT(t, 5*time.Second), zk.StateDisconnected))
	ev := waitEvent(t, gone, 10*time.Second)
	require.Equal(t, zk.EventNodeDeleted, ev.Type)
	t.Logf("session expired on the server %v after the stall began", time.Since(stalledAt))

	p.Resume()
	require.NoError(t, cli.WaitState(ctxT(t, 10*time.Second), zk.StateExpired))
	// go-zookeeper then establishes a fresh session by itself.
	require.NoError(t, cli.WaitState(ctxT(t, 10*time.Second), zk.StateHasSession))
	require.NotEqual(t, sid, cli.SessionID())
	_, err = cli.Create("/after-expiry", nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
}

// TestProxyCutAndBlock resets a client's connection: it reconnects with the
// same session; with the proxy blocked it cannot, until unblocked.
func TestProxyCutAndBlock(t *testing.T) {
	c := zktest.Start(t)
	p := zktest.NewProxy(t, c.Addrs()...)
	// go-zookeeper waits 1s before retrying its only server, so give the
	// session enough room to survive that.
	cli := zktest.Connect(t, []string{p.Addr()}, 4*time.Second)
	sid := cli.SessionID()
	_, err := cli.Create("/cut-eph", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	require.Equal(t, 1, p.ActiveConns())

	p.Cut()
	require.NoError(t, cli.WaitState(ctxT(t, 5*time.Second), zk.StateDisconnected))
	require.NoError(t, cli.WaitState(ctxT(t, 10*time.Second), zk.StateHasSession))
	require.Equal(t, sid, cli.SessionID())
	ok, _, err := cli.Exists("/cut-eph")
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, 2, p.Accepted())

	p.Block(true)
	p.Cut()
	require.NoError(t, cli.WaitState(ctxT(t, 5*time.Second), zk.StateDisconnected))
	ctx := ctxT(t, 10*time.Second)
	for p.Refused() == 0 { // the client's reconnect attempt was refused
		require.NoError(t, ctx.Err(), "client never tried to reconnect")
		time.Sleep(20 * time.Millisecond)
	}
	require.NotEqual(t, zk.StateHasSession, cli.State())
	p.Block(false)
	require.NoError(t, cli.WaitState(ctxT(t, 10*time.Second), zk.StateHasSession))
	require.Equal(t, sid, cli.SessionID())
	_, err = cli.Create("/after-cut", nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
}

// TestContainerCheck: with a short check interval an emptied container node
// disappears promptly.
func TestContainerCheck(t *testing.T) {
	c := zktest.Start(t, zktest.WithContainerCheck(100*time.Millisecond))
	c.SkipIfExternal(t)
	cli := zktest.Connect(t, c.Addrs(), 10*time.Second)
	_, err := cli.CreateContainer("/box", nil, zk.FlagContainer, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	_, err = cli.Create("/box/item", nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	ok, _, gone, err := cli.ExistsW("/box")
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, cli.Delete("/box/item", -1))
	require.Equal(t, zk.EventNodeDeleted, waitEvent(t, gone, 10*time.Second).Type)
}

// TestMaxSessionTimeout: the server is configured to grant at most the
// given session timeout.
func TestMaxSessionTimeout(t *testing.T) {
	c := zktest.Start(t, zktest.WithMaxSessionTimeout(1500*time.Millisecond))
	conf, err := zktest.FourLetter(ctxT(t, 5*time.Second), c.Addrs()[0], "conf")
	require.NoError(t, err)
	require.Contains(t, conf, "maxSessionTimeout=1500")
}

// TestExternalServers runs Start against ZKLOCK_TEST_SERVERS (pointed at a
// local server): basic use works, lifecycle helpers skip.
func TestExternalServers(t *testing.T) {
	local := zktest.Start(t)
	local.SkipIfExternal(t)
	t.Setenv(zktest.EnvServers, " "+local.Addrs()[0]+" ")

	c := zktest.Start(t)
	require.True(t, c.External())
	require.Equal(t, local.Addrs(), c.Addrs())
	require.NoError(t, c.WaitHealthy(ctxT(t, 5*time.Second)))
	cli := zktest.Connect(t, c.Addrs(), 10*time.Second)
	_, err := cli.Create("/ext", nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)

	// Lifecycle helpers skip the test that started the external cluster.
	var sub *testing.T
	reached := false
	t.Run("kill skips", func(t *testing.T) {
		sub = t
		c := zktest.Start(t)
		_ = c.Servers()[0].Kill()
		reached = true
	})
	require.True(t, sub.Skipped())
	require.False(t, reached)
	require.True(t, local.Servers()[0].Running())

	var ensembleSub *testing.T
	t.Run("ensemble skips", func(t *testing.T) {
		ensembleSub = t
		zktest.Start(t, zktest.WithEnsemble(3))
	})
	require.True(t, ensembleSub.Skipped())

	mc, stop, err := zktest.StartMain()
	require.NoError(t, err)
	defer stop()
	require.True(t, mc.External())
	require.ErrorIs(t, mc.Servers()[0].Stop(), zktest.ErrExternal)
}

// TestStartMain starts and stops a server without a testing.TB.
func TestStartMain(t *testing.T) {
	if os.Getenv(zktest.EnvServers) != "" {
		t.Skip("local servers only")
	}
	var mu sync.Mutex
	var lines []string
	logf := func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, fmt.Sprintf(f, a...))
	}
	c, stop, err := zktest.StartMain(zktest.WithLogf(logf))
	require.NoError(t, err)
	s := c.Servers()[0]
	dir := s.Dir()
	require.DirExists(t, dir)
	_, err = zktest.FourLetter(ctxT(t, 5*time.Second), c.Addrs()[0], "ruok")
	require.NoError(t, err)
	stop()
	require.False(t, s.Running())
	_, err = os.Stat(dir)
	require.True(t, errors.Is(err, os.ErrNotExist))
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, lines)
	require.True(t, slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "zk1: ") }))
}

// TestStartRetriesStolenPort: a port taken between choosing it and the JVM
// binding it makes the server exit; Start retries on new ports.
//
// Not parallel: the launch hook is the package's, and would run for any
// other test's servers too.
func TestStartRetriesStolenPort(t *testing.T) {
	if os.Getenv(zktest.EnvServers) != "" {
		t.Skip("local servers only")
	}
	var stolen net.Listener
	restore := zktest.SetBeforeLaunch(func(addrs []string) {
		if stolen == nil {
			l, err := net.Listen("tcp", addrs[0])
			require.NoError(t, err)
			stolen = l
		}
	})
	defer restore()
	c := zktest.Start(t)
	require.NotNil(t, stolen)
	defer stolen.Close()
	require.NotEqual(t, stolen.Addr().String(), c.Addrs()[0])
	require.NoError(t, c.WaitHealthy(ctxT(t, 5*time.Second)))
}
