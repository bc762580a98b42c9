// Package zkserver runs throwaway ZooKeeper servers on this machine: one JVM
// per server, on free 127.0.0.1 ports, in a temporary data directory. It finds
// the install and Java, writes zoo.cfg, launches, stops, kills and restarts
// the processes, and waits until they serve. Where no local install is found
// but a Docker engine answers, it starts a standalone server in Docker
// instead (see docker.go).
//
// Two programs share it: the test harness zktest, which adds the testing.TB
// conveniences (cleanup, skipping, logging to the test) and the servers named
// in ZKLOCK_TEST_SERVERS, and 'zklock server', which must not link the
// testing package into the zklock binary. Its messages keep the "zktest: "
// prefix they had when this code was part of the harness.
package zkserver

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// EnvServers names the environment variable that points the tests at
// externally managed servers instead of starting local ones. The Docker
// fallback reports its server's address in that form too.
const EnvServers = "ZKLOCK_TEST_SERVERS"

// InstallHint tells a developer how to get a ZooKeeper; it is part of every
// "no ZooKeeper" failure. Each way it names works for a user of the module
// as downloaded (the module zip holds scripts/, but not the nested module
// zktest/zkcontainer, so zktest starts a Docker container by itself only
// from a checkout of zklock).
const InstallHint = "to get one: run `make test` in a checkout of zklock (it installs ZooKeeper), " +
	"or run `sudo sh scripts/install-zookeeper.sh` from zklock's checkout or module directory " +
	"(`go list -m -f '{{.Dir}}' github.com/zklock/zklock`), " +
	"or set " + EnvServers + "=host:port[,host:port...] to use servers that are already running, " +
	"for instance " + DockerRecipe + "; " +
	"from a checkout of zklock zktest also starts that container itself when a Docker engine answers"

// DockerRecipe starts a ZooKeeper for the tests in Docker by hand: what a
// user of the module does, since the automatic fallback (the module
// zktest/zkcontainer) is only in a checkout.
// It configures the server as the automatic fallback does (short ticks,
// session timeouts from 200 ms, four-letter words for Mntr).
const DockerRecipe = "`docker run -d --rm -p 127.0.0.1:2181:2181 -e ZOO_TICK_TIME=100 -e ZOO_4LW_COMMANDS_WHITELIST='*' " +
	"-e ZOO_CFG_EXTRA='minSessionTimeout=200 maxSessionTimeout=60000' zookeeper:3.8` then " + EnvServers + "=127.0.0.1:2181"

// DefaultStartTimeout bounds how long starting (or restarting) servers may
// take before giving up and reporting the server log.
const DefaultStartTimeout = 60 * time.Second

// DefaultMaxSessionTimeout is the largest session timeout started servers
// grant unless Config.MaxSessionTimeout says otherwise.
const DefaultMaxSessionTimeout = 60 * time.Second

// ErrExternal is returned by the lifecycle methods of external servers.
var ErrExternal = errors.New("zktest: server is external (" + EnvServers + "); lifecycle control is not supported")

// Config describes the servers to start; DefaultConfig holds the defaults.
type Config struct {
	// Ensemble is how many servers form the quorum (1: a standalone server).
	Ensemble int
	// Observers is how many observers join the ensemble beside its voters:
	// servers that serve clients and forward writes but do not vote. They
	// come after the voters (ids Ensemble+1 ...) and need Ensemble >= 2.
	Observers int
	// Tick is ZooKeeper's tickTime. The session timeout a server grants is
	// clamped to [2*Tick, MaxSessionTimeout]; initLimit (10) and syncLimit
	// (5) count ticks.
	Tick time.Duration
	// MaxSessionTimeout is the largest session timeout the servers grant
	// (ZooKeeper's maxSessionTimeout); 0 means DefaultMaxSessionTimeout.
	MaxSessionTimeout time.Duration
	// ClientPort is the first server's client port; 0 picks a free one.
	ClientPort int
	// ContainerCheck, when positive, is how often the servers delete empty
	// container znodes (without rate limit).
	ContainerCheck time.Duration
	// SyncLimit is how many ticks a follower waits for its leader before it
	// leaves it (ZooKeeper's syncLimit); 0 means 5.
	SyncLimit int
	// ForceSync keeps ZooKeeper's default of an fsync per transaction log
	// write (tests turn it off: it only protects against power loss).
	ForceSync bool
	// SysProps are passed to every server JVM as -Dkey=value.
	SysProps [][2]string
	// StartTimeout bounds start-up and Restart.
	StartTimeout time.Duration
	// Logf receives every server output line, prefixed with the server id;
	// nil discards them. The last lines of every server are kept regardless
	// and included in start-up errors.
	Logf func(format string, args ...any)
	// TLS, when set, serves clients on a TLS-only port (secureClientPort)
	// with certificates made at start-up; see Cluster.TLS. It needs a local
	// install (not Docker).
	TLS *TLSConfig
	// ClockShifts, when set, shifts the wall clock of server i (index i,
	// id i+1) by ClockShifts[i] (missing entries: 0), with libfaketime
	// preloaded into its JVM: a server whose clock is set wrong. Its
	// monotonic clock, by which ZooKeeper times ticks and sessions, is
	// not shifted. A shift stays with the server across restarts. It
	// needs a local install and libfaketime (EnvLibfaketime).
	ClockShifts []time.Duration
	// BeforeLaunch, when set, runs after the ports are chosen and before the
	// servers are launched, with their client addresses (for tests).
	BeforeLaunch func(addrs []string)
	// PeerPort, when set, chooses the port that a server's zoo.cfg names for
	// a peer's quorum or election port (link.Port is the one the peer
	// binds), so that a test can route every server-to-server connection
	// through a proxy of its own and partition a server from the others
	// while its clients still reach it. It is called for every link each
	// time the configs are written: once per start attempt, so again with
	// new ports when start retries after a port was taken.
	PeerPort func(link PeerLink) (int, error)
	// Reconfig runs the servers with dynamic reconfiguration enabled
	// (reconfigEnabled, standaloneEnabled=false, client addresses in the
	// server lines): members can be added and removed while the ensemble
	// serves (reconfig.go). Not with PeerPort or TLS.
	Reconfig bool
}

// DefaultConfig is one standalone server with a 100ms tick (sessions may be
// as short as 200ms) on a free port, started within DefaultStartTimeout.
func DefaultConfig() Config {
	return Config{Ensemble: 1, Tick: 100 * time.Millisecond, StartTimeout: DefaultStartTimeout}
}

// Start starts cfg.Ensemble local servers (and cfg.Observers observers), each in a directory of a fresh
// temporary one (zktest-*, which records the process that owns it; Start
// first removes those whose owner has exited without its cleanups), and waits until all of them serve (and, for an ensemble,
// agree on a leader). Without a local install it starts a standalone server
// in Docker if an engine answers: that cluster is external (no lifecycle
// control). It returns the cluster and a function that stops it and removes
// its data, or an error (which includes InstallHint when ZooKeeper is
// missing).
func Start(cfg Config) (*Cluster, func(), error) {
	if cfg.Observers > 0 && cfg.Ensemble < 2 {
		return nil, nil, fmt.Errorf("zktest: %d observer(s) need an ensemble of at least 2 voting servers, not %d", cfg.Observers, cfg.Ensemble)
	}
	if cfg.Reconfig && (cfg.PeerPort != nil || cfg.TLS != nil) {
		return nil, nil, fmt.Errorf("zktest: reconfiguration cannot be combined with partitions or TLS")
	}
	inst, err := findInstall()
	if err != nil {
		return startDockerInstead(cfg, err)
	}
	for _, d := range sweepLeftovers() { // what test binaries that died before their cleanups left
		if cfg.Logf != nil {
			cfg.Logf("zktest: removed %s, left by a test process that has exited", d)
		}
	}
	base, err := os.MkdirTemp("", "zktest-")
	if err != nil {
		return nil, nil, err
	}
	if err := writeOwner(base); err != nil {
		os.RemoveAll(base)
		return nil, nil, err
	}
	dirs := make([]string, cfg.Ensemble+cfg.Observers)
	for i := range dirs {
		dirs[i] = fmt.Sprintf("%s/zk%d", base, i+1)
		if err := os.MkdirAll(dirs[i], 0o755); err != nil {
			os.RemoveAll(base)
			return nil, nil, err
		}
	}
	c := newLocal(inst, cfg, dirs)
	c.baseDir = base
	if shifted(cfg.ClockShifts) {
		if c.faketime, err = findLibfaketime(); err != nil {
			os.RemoveAll(base)
			return nil, nil, err
		}
	}
	if cfg.TLS != nil {
		if c.tls, err = NewTLSMaterial(base+"/tls", "zklock-test-client"); err != nil {
			os.RemoveAll(base)
			return nil, nil, fmt.Errorf("zktest: making TLS certificates: %w", err)
		}
	}
	if err := c.start(); err != nil {
		c.Shutdown()
		return nil, nil, err
	}
	return c, c.Shutdown, nil
}

// startDockerInstead is Start without a local install (noInstall says why):
// a standalone server in Docker, or the reasons there is none.
func startDockerInstead(cfg Config, noInstall error) (*Cluster, func(), error) {
	if cfg.TLS != nil {
		return nil, nil, fmt.Errorf("zktest: a TLS cluster needs a local ZooKeeper install: %w\n%s", noInstall, InstallHint)
	}
	if cfg.MaxSessionTimeout > 0 {
		return nil, nil, fmt.Errorf("zktest: a maximum session timeout needs a local ZooKeeper install: %w\n%s", noInstall, InstallHint)
	}
	if shifted(cfg.ClockShifts) {
		return nil, nil, fmt.Errorf("zktest: servers with shifted clocks need a local ZooKeeper install: %w\n%s", noInstall, InstallHint)
	}
	if cfg.Ensemble == 1 {
		addr, stop, derr := startDocker(cfg.Logf)
		if derr == nil {
			return NewExternal([]string{addr}, cfg), stop, nil
		}
		noInstall = fmt.Errorf("%w; Docker: %v", noInstall, derr)
	}
	return nil, nil, fmt.Errorf("zktest: %w\n%s", noInstall, InstallHint)
}

// syncLimit is c.SyncLimit, or ZooKeeper's sample value 5.
func (c Config) syncLimit() int {
	if c.SyncLimit > 0 {
		return c.SyncLimit
	}
	return 5
}
