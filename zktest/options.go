package zktest

import (
	"time"

	"github.com/zklock/zklock/internal/zkserver"
)

// config is what the servers are started with, plus whether WithLogf chose
// the log (Start logs to the test otherwise).
type config struct {
	zkserver.Config
	logfSet    bool
	partitions bool // WithPartitions
}

// Option configures Start and StartMain.
type Option func(*config)

// WithEnsemble starts n servers forming one quorum (default 1: a standalone
// server). An ensemble is what exercises leader failover and session moves
// between servers; standalone is enough for everything else and starts faster.
func WithEnsemble(n int) Option {
	return func(c *config) {
		if n < 1 {
			n = 1
		}
		c.Ensemble = n
	}
}

// WithObservers adds n observers to the ensemble (default 0): servers that
// serve clients and forward their writes to the leader like followers, but
// do not vote, so they add read capacity and client connections without
// slowing commits. The cluster then has WithEnsemble's voting servers plus n
// observers (peerType=observer); Addrs and Servers list the voters first,
// then the observers (Server.Observer tells them apart), and their mntr
// reports zk_server_state "observer". Observers need an ensemble of at
// least 2 voters (WithEnsemble) and servers started here: with
// ZKLOCK_TEST_SERVERS set, Start skips the test.
func WithObservers(n int) Option {
	return func(c *config) { c.Observers = max(n, 0) }
}

// WithClientPort makes the first server listen for clients on port (default:
// a free port). For trying things out by hand; tests should keep free ports.
func WithClientPort(port int) Option {
	return func(c *config) { c.ClientPort = port }
}

// WithTickTime sets ZooKeeper's tickTime (default 100ms). The session timeout
// a server grants is clamped to [2*tick, 60s] (see WithMaxSessionTimeout), so the default allows the short
// (e.g. 1s) sessions that make expiry tests fast. initLimit (10) and syncLimit
// (5) are counted in ticks too.
func WithTickTime(d time.Duration) Option {
	return func(c *config) {
		if d < time.Millisecond {
			d = time.Millisecond
		}
		c.Tick = d
	}
}

// WithSyncLimit sets ZooKeeper's syncLimit: how many ticks a follower waits
// for its leader before it leaves it and the ensemble elects again (default
// 5). A frozen leader (Server.Freeze) keeps its followers for that long.
func WithSyncLimit(ticks int) Option {
	return func(c *config) { c.SyncLimit = ticks }
}

// WithMaxSessionTimeout sets the largest session timeout the servers grant
// (ZooKeeper's maxSessionTimeout, default 60s; never below 2*tick). A client
// asking for more is granted d: for testing that a client goes by the timeout
// granted, not the one it asked for. It needs servers started here: with
// ZKLOCK_TEST_SERVERS set, Start skips the test.
func WithMaxSessionTimeout(d time.Duration) Option {
	return func(c *config) { c.MaxSessionTimeout = d }
}

// WithContainerCheck makes the server look for empty container znodes every d
// (ZooKeeper's default is 60s) and delete them without rate limit, so tests
// can observe that containers vanish. ZooKeeper never deletes a container that
// never had a child unless znode.container.maxNeverUsedIntervalMs is set; use
// WithSystemProperty for that.
func WithContainerCheck(d time.Duration) Option {
	return func(c *config) {
		if d < time.Millisecond {
			d = time.Millisecond
		}
		c.ContainerCheck = d
	}
}

// WithForceSync keeps ZooKeeper's default fsync of every transaction log
// write, as in production (the harness turns it off for speed): for
// benchmarks whose writes should cost what they cost there.
func WithForceSync() Option {
	return func(c *config) { c.ForceSync = true }
}

// WithSystemProperty passes -Dkey=value to every server JVM (for example
// zookeeper.extendedTypesEnabled=true to allow TTL nodes).
func WithSystemProperty(key, value string) Option {
	return func(c *config) { c.SysProps = append(c.SysProps, [2]string{key, value}) }
}

// WithLogf sends every server output line (prefixed with the server id) to f.
// It defaults to t.Logf for Start (shown on failure or with -v) and to
// discarding for StartMain. nil discards. The last lines of every server are
// kept regardless and included in start-up errors.
func WithLogf(f func(format string, args ...any)) Option {
	return func(c *config) { c.Logf, c.logfSet = f, true }
}

// WithStartTimeout bounds start-up and Restart (default 60s).
func WithStartTimeout(d time.Duration) Option {
	return func(c *config) { c.StartTimeout = d }
}

// testHookBeforeLaunch lets tests interfere between port choice and launch.
var testHookBeforeLaunch func(addrs []string)

func newConfig(opts []Option) config {
	c := config{Config: zkserver.DefaultConfig()}
	c.BeforeLaunch = testHookBeforeLaunch
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithTLS serves clients on a TLS-only port (ZooKeeper's secureClientPort,
// no plain client port) with certificates made at start-up: a CA, a server
// certificate for 127.0.0.1 and localhost, and a client certificate (see
// Cluster.TLSConfig and Cluster.TLSFiles). clientAuth is ZooKeeper's
// ssl.clientAuth: "need" (a client certificate is required), "want" or
// "none". It needs a local install: with ZKLOCK_TEST_SERVERS set, Start
// skips the test.
func WithTLS(clientAuth string) Option {
	return func(c *config) { c.TLS = &zkserver.TLSConfig{ClientAuth: clientAuth} }
}

// WithPartitions routes every server-to-server connection of an ensemble
// through a Proxy of its own, one per direction and port (quorum and
// election), so that Cluster.Partition can cut a server off from the others
// while its clients still reach it: the fault where a follower goes on
// answering its clients after the leader has expired their sessions. Each
// server's zoo.cfg names the proxies' ports for its peers, and its own real
// ports on the wildcard address for itself (so its quorum and election ports
// listen on every interface; see zkserver's Config.PeerPort for why). The
// proxies live as long as the cluster. It needs an
// ensemble (WithEnsemble or WithObservers) and servers started here: with
// ZKLOCK_TEST_SERVERS set, Start skips the test.
func WithPartitions() Option {
	return func(c *config) { c.partitions = true }
}

// WithClockShifts starts server i (index i, id i+1) with its wall clock
// shifted by shifts[i] (missing entries: 0): an ensemble whose servers'
// clocks disagree, as when one is off NTP. ZooKeeper stamps every
// transaction (a node's ctime and mtime) with the wall clock of the server
// that leads when it commits, so a leader change moves the ensemble's time
// by the difference. The shift is made by preloading libfaketime into the
// server's JVM (the monotonic clock, which times ticks and sessions, is left
// alone) and stays with the server across Restart. It needs libfaketime
// (Debian's faketime package, which make test installs; or
// ZKLOCK_LIBFAKETIME naming libfaketime.so.1) and servers started here:
// with ZKLOCK_TEST_SERVERS set, Start skips the test.
func WithClockShifts(shifts ...time.Duration) Option {
	return func(c *config) { c.ClockShifts = append([]time.Duration(nil), shifts...) }
}
