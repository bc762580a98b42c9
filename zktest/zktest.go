// Package zktest starts real ZooKeeper servers for tests and injects faults
// between clients and servers.
//
// A lock library cannot be trusted on a fake: sessions, ephemeral nodes,
// watches and leader elections only behave like production on a real server.
// zktest therefore runs ZooKeeper itself (one JVM per server, on free
// 127.0.0.1 ports, in a temporary data directory) and tears it down with the
// test. Where to find ZooKeeper, in order:
//
//  1. ZKLOCK_TEST_SERVERS=host:port[,host:port...]: servers someone else runs.
//     They are used as they are; nothing is started or stopped, and the server
//     fault helpers (Server.Stop, Kill, Restart) skip the test.
//  2. A local install: $ZOOKEEPER_HOME (the Apache tarball layout:
//     $ZOOKEEPER_HOME/lib/*.jar and $ZOOKEEPER_HOME/*.jar) or the Debian
//     package (/usr/share/java/zookeeper.jar). Java is $JAVA_HOME/bin/java or
//     java on $PATH.
//  3. Otherwise the test fails with instructions: `make test` installs
//     ZooKeeper, or run `sudo scripts/install-zookeeper.sh`, or set
//     ZKLOCK_TEST_SERVERS.
//
// Client-side faults (partitions, pauses, resets) do not need control of the
// server and work with external servers too: see Proxy.
package zktest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// EnvServers names the environment variable that points the tests at
// externally managed servers instead of starting local ones.
const EnvServers = "ZKLOCK_TEST_SERVERS"

// InstallHint tells a developer how to get a ZooKeeper for the tests; it is
// part of every "no ZooKeeper" failure.
const InstallHint = "to get one: run `make test` (it installs ZooKeeper), " +
	"or run `sudo scripts/install-zookeeper.sh`, " +
	"or set " + EnvServers + "=host:port[,host:port...] to use servers that are already running, " +
	"or run a Docker engine (zktest then starts the zookeeper image with testcontainers-go)"

// DefaultStartTimeout bounds how long starting (or restarting) servers may
// take before the harness gives up and reports the server log.
const DefaultStartTimeout = 60 * time.Second

// ErrExternal is returned by server lifecycle methods on servers named in
// ZKLOCK_TEST_SERVERS when no testing.TB is available to skip (StartMain).
var ErrExternal = errors.New("zktest: server is external (" + EnvServers + "); lifecycle control is not supported")

type config struct {
	ensemble       int
	tick           time.Duration
	clientPort     int
	containerCheck time.Duration
	logf           func(format string, args ...any)
	logfSet        bool
	sysProps       [][2]string
	startTimeout   time.Duration
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
		c.ensemble = n
	}
}

// WithClientPort makes the first server listen for clients on port (default:
// a free port). For trying things out by hand; tests should keep free ports.
func WithClientPort(port int) Option {
	return func(c *config) { c.clientPort = port }
}

// WithTickTime sets ZooKeeper's tickTime (default 100ms). The session timeout
// a server grants is clamped to [2*tick, 60s], so the default allows the short
// (e.g. 1s) sessions that make expiry tests fast. initLimit (10) and syncLimit
// (5) are counted in ticks too.
func WithTickTime(d time.Duration) Option {
	return func(c *config) {
		if d < time.Millisecond {
			d = time.Millisecond
		}
		c.tick = d
	}
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
		c.containerCheck = d
	}
}

// WithSystemProperty passes -Dkey=value to every server JVM (for example
// zookeeper.extendedTypesEnabled=true to allow TTL nodes).
func WithSystemProperty(key, value string) Option {
	return func(c *config) { c.sysProps = append(c.sysProps, [2]string{key, value}) }
}

// WithLogf sends every server output line (prefixed with the server id) to f.
// It defaults to t.Logf for Start (shown on failure or with -v) and to
// discarding for StartMain. nil discards. The last lines of every server are
// kept regardless and included in start-up errors.
func WithLogf(f func(format string, args ...any)) Option {
	return func(c *config) { c.logf, c.logfSet = f, true }
}

// WithStartTimeout bounds start-up and Restart (default 60s).
func WithStartTimeout(d time.Duration) Option {
	return func(c *config) { c.startTimeout = d }
}

func newConfig(opts []Option) config {
	c := config{ensemble: 1, tick: 100 * time.Millisecond, startTimeout: DefaultStartTimeout}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// Cluster is a set of ZooKeeper servers serving one namespace: either
// processes started by this package, or external servers.
type Cluster struct {
	servers  []*Server
	external bool
	cfg      config
	inst     *install
	tb       testing.TB // nil for StartMain
	log      *guardedLogf
	baseDir  string
	stopOnce sync.Once
}

// Start returns a running ZooKeeper cluster for the test, torn down by
// t.Cleanup. It uses, in order: the servers named in ZKLOCK_TEST_SERVERS
// (external: no lifecycle control), a local install (ZOOKEEPER_HOME, or
// /usr/share/java/zookeeper.jar), a container started with testcontainers-go
// when a Docker engine answers (standalone only, no lifecycle control), and
// otherwise fails the test with instructions for getting ZooKeeper. It only skips the test when an ensemble
// larger than the external server list is requested.
func Start(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	cfg := newConfig(opts)
	if !cfg.logfSet {
		cfg.logf = t.Logf
	}
	if ext := externalServers(); len(ext) > 0 {
		if cfg.ensemble > len(ext) {
			t.Skipf("zktest: test needs a %d-server ensemble but %s names %d server(s)", cfg.ensemble, EnvServers, len(ext))
		}
		c := newExternal(ext, cfg)
		c.tb = t
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.WaitHealthy(ctx); err != nil {
			t.Fatalf("zktest: %s=%s is not usable: %v", EnvServers, os.Getenv(EnvServers), err)
		}
		return c
	}
	inst, err := findInstall()
	if err != nil {
		if cfg.ensemble == 1 {
			addr, stop, derr := startDocker(cfg.logf)
			if derr == nil {
				t.Cleanup(stop)
				c := newExternal([]string{addr}, cfg)
				c.tb = t
				return c
			}
			err = fmt.Errorf("%w; Docker: %v", err, derr)
		}
		t.Fatalf("zktest: %v\n%s", err, InstallHint)
	}
	dirs := make([]string, cfg.ensemble)
	for i := range dirs {
		dirs[i] = t.TempDir() // registered before our cleanup, so removed after the servers are dead
	}
	c := newLocal(inst, cfg, dirs)
	c.tb = t
	t.Cleanup(c.shutdown)
	if err := c.start(); err != nil {
		t.Fatalf("%v", err)
	}
	return c
}

// StartMain is Start for TestMain, where there is no testing.TB: it returns
// the cluster and a function that stops it and removes its data, or an error
// (which includes InstallHint when ZooKeeper is missing). Server output is
// discarded unless WithLogf is given. Lifecycle methods of external servers
// return ErrExternal instead of skipping.
func StartMain(opts ...Option) (*Cluster, func(), error) {
	cfg := newConfig(opts)
	if ext := externalServers(); len(ext) > 0 {
		if cfg.ensemble > len(ext) {
			return nil, nil, fmt.Errorf("zktest: a %d-server ensemble was requested but %s names %d server(s)", cfg.ensemble, EnvServers, len(ext))
		}
		c := newExternal(ext, cfg)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.WaitHealthy(ctx); err != nil {
			return nil, nil, fmt.Errorf("zktest: %s=%s is not usable: %w", EnvServers, os.Getenv(EnvServers), err)
		}
		return c, func() {}, nil
	}
	inst, err := findInstall()
	if err != nil {
		if cfg.ensemble == 1 {
			addr, stop, derr := startDocker(cfg.logf)
			if derr == nil {
				return newExternal([]string{addr}, cfg), stop, nil
			}
			err = fmt.Errorf("%w; Docker: %v", err, derr)
		}
		return nil, nil, fmt.Errorf("zktest: %w\n%s", err, InstallHint)
	}
	base, err := os.MkdirTemp("", "zktest-")
	if err != nil {
		return nil, nil, err
	}
	dirs := make([]string, cfg.ensemble)
	for i := range dirs {
		dirs[i] = fmt.Sprintf("%s/zk%d", base, i+1)
		if err := os.MkdirAll(dirs[i], 0o755); err != nil {
			os.RemoveAll(base)
			return nil, nil, err
		}
	}
	c := newLocal(inst, cfg, dirs)
	c.baseDir = base
	if err := c.start(); err != nil {
		c.shutdown()
		return nil, nil, err
	}
	return c, c.shutdown, nil
}

func externalServers() []string {
	var out []string
	for _, s := range strings.Split(os.Getenv(EnvServers), ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func newExternal(addrs []string, cfg config) *Cluster {
	c := &Cluster{external: true, cfg: cfg, log: newGuardedLogf(cfg.logf)}
	for i, a := range addrs {
		c.servers = append(c.servers, &Server{c: c, index: i, id: i + 1, addr: a, external: true})
	}
	return c
}

// start launches every server and waits until all of them serve (and, for an
// ensemble, agree on a leader).
// Ports are picked by binding :0 and released before the JVM binds them, so
// another process can take one in between; the server then exits with a
// BindException and we retry on fresh ports.
func (c *Cluster) start() error {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.startTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		if err := c.allocatePorts(); err != nil {
			return err
		}
		for _, s := range c.servers {
			if err := s.writeConfig(); err != nil {
				return err
			}
		}
		if testHookBeforeLaunch != nil {
			testHookBeforeLaunch(c)
		}
		for _, s := range c.servers {
			if err := s.launch(); err != nil {
				return err
			}
		}
		err := c.waitHealthy(ctx, true)
		if err == nil {
			return nil
		}
		if attempt < 3 && c.portTaken() {
			c.log.logf("zktest: a port was taken before ZooKeeper could bind it; retrying on new ports")
			for _, s := range c.servers {
				_ = s.kill()
			}
			continue
		}
		return fmt.Errorf("zktest: ZooKeeper (%s) did not become healthy: %w%s", c.inst, err, c.logTails(40))
	}
}

// testHookBeforeLaunch lets tests interfere between port choice and launch.
var testHookBeforeLaunch func(*Cluster)

func (c *Cluster) portTaken() bool {
	for _, s := range c.servers {
		for _, l := range s.tail.last(100) {
			if strings.Contains(l, "Address already in use") {
				return true
			}
		}
	}
	return false
}

// shutdown kills every server (no need to be graceful: the data goes away)
// and silences the log before the test is marked complete, since t.Logf after
// that panics.
func (c *Cluster) shutdown() {
	c.stopOnce.Do(func() {
		for _, s := range c.servers {
			_ = s.kill()
		}
		c.log.close()
		if c.baseDir != "" {
			_ = os.RemoveAll(c.baseDir)
		}
	})
}

// External reports whether the servers are external (ZKLOCK_TEST_SERVERS).
func (c *Cluster) External() bool { return c.external }

// SkipIfExternal skips the test when the servers are external, for tests that
// need control of the server processes or exact server metrics.
func (c *Cluster) SkipIfExternal(t testing.TB) {
	t.Helper()
	if c.external {
		t.Skipf("zktest: needs locally started ZooKeeper servers; %s is set", EnvServers)
	}
}

// Addrs returns the client address ("127.0.0.1:port") of every server, in
// order, including stopped ones; pass it to zk.Connect.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.servers))
	for i, s := range c.servers {
		out[i] = s.Addr()
	}
	return out
}

// Servers returns the servers in order; index i is server id i+1.
func (c *Cluster) Servers() []*Server { return append([]*Server(nil), c.servers...) }

// Mntr returns the `mntr` output of server i.
func (c *Cluster) Mntr(i int) (Mntr, error) {
	if i < 0 || i >= len(c.servers) {
		return nil, fmt.Errorf("zktest: no server %d", i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return GetMntr(ctx, c.servers[i].Addr())
}

// Leader returns the index of the server that currently leads (0 for a
// standalone server). Only running servers are asked.
func (c *Cluster) Leader() (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var errs []error
	for i, s := range c.servers {
		if !s.Running() {
			continue
		}
		mode, err := ServerMode(ctx, s.Addr())
		if err != nil {
			errs = append(errs, fmt.Errorf("server %d: %w", i, err))
			continue
		}
		if mode == "leader" || mode == "standalone" {
			return i, nil
		}
	}
	return -1, fmt.Errorf("zktest: no leader: %w", errors.Join(errs...))
}

// WaitHealthy waits until every running server serves clients and, for an
// ensemble, exactly one of them leads and a quorum is up. It polls; ctx bounds
// the wait.
func (c *Cluster) WaitHealthy(ctx context.Context) error { return c.waitHealthy(ctx, false) }

func (c *Cluster) waitHealthy(ctx context.Context, all bool) error {
	for {
		err := c.checkHealthy(ctx, all)
		if err == nil {
			return nil
		}
		var fatal *exitedError
		if errors.As(err, &fatal) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last check: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

type exitedError struct{ s *Server }

func (e *exitedError) Error() string {
	return fmt.Sprintf("server %d (%s) exited: %v", e.s.id, e.s.Addr(), e.s.exitErr())
}

func (c *Cluster) checkHealthy(ctx context.Context, all bool) error {
	serving, leaders := 0, 0
	for _, s := range c.servers {
		if !s.Running() {
			if all {
				return &exitedError{s}
			}
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		mode, err := ServerMode(cctx, s.Addr())
		cancel()
		if errors.Is(err, errNotWhitelisted) && s.external {
			serving++ // reachable; can't tell more without srvr
			continue
		}
		if err != nil {
			return fmt.Errorf("server %d (%s): %w", s.id, s.Addr(), err)
		}
		switch mode {
		case "leader", "standalone":
			leaders++
			serving++
		case "follower", "observer":
			serving++
		default:
			return fmt.Errorf("server %d (%s) is in mode %q", s.id, s.Addr(), mode)
		}
	}
	if serving == 0 {
		return errors.New("no server is running")
	}
	if len(c.servers) > 1 && !c.external {
		if leaders != 1 {
			return fmt.Errorf("%d leaders among %d serving servers", leaders, serving)
		}
		if serving < len(c.servers)/2+1 {
			return fmt.Errorf("only %d of %d servers serve: no quorum", serving, len(c.servers))
		}
	}
	return nil
}

// logTails renders the last n lines of every local server's output.
func (c *Cluster) logTails(n int) string {
	var b strings.Builder
	for _, s := range c.servers {
		if s.tail == nil {
			continue
		}
		fmt.Fprintf(&b, "\n--- last lines of server %d (%s, dir %s) ---\n", s.id, s.Addr(), s.dir)
		for _, l := range s.tail.last(n) {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// guardedLogf forwards to a testing logger until closed: output goroutines
// may race with the end of the test, and t.Logf after the test completed
// panics.
type guardedLogf struct {
	mu     sync.Mutex
	f      func(string, ...any)
	closed bool
}

func newGuardedLogf(f func(string, ...any)) *guardedLogf { return &guardedLogf{f: f} }

func (g *guardedLogf) logf(format string, args ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed && g.f != nil {
		g.f(format, args...)
	}
}

func (g *guardedLogf) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}
