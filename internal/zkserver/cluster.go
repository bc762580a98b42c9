package zkserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Cluster is a set of ZooKeeper servers serving one namespace: either
// processes started by this package, or external servers.
type Cluster struct {
	servers  []*Server
	external bool
	cfg      Config
	inst     *install
	log      *Log
	baseDir  string
	tls      *TLSMaterial // nil: plain client ports
	faketime string       // libfaketime's path, when a server's clock is shifted
	ports    []portLock   // the servers' ports, reserved until Shutdown
	stopOnce sync.Once
}

// NewExternal returns a cluster of servers that someone else runs: nothing is
// started or stopped, and their lifecycle methods return ErrExternal.
func NewExternal(addrs []string, cfg Config) *Cluster {
	c := &Cluster{external: true, cfg: cfg, log: NewLog(cfg.Logf)}
	for i, a := range addrs {
		c.servers = append(c.servers, &Server{c: c, index: i, id: i + 1, addr: a, external: true})
	}
	return c
}

func newLocal(inst *install, cfg Config, dirs []string) *Cluster {
	c := &Cluster{cfg: cfg, inst: inst, log: NewLog(cfg.Logf)}
	for i, d := range dirs {
		c.servers = append(c.servers, &Server{
			c: c, index: i, id: i + 1, dir: d,
			observer: i >= cfg.Ensemble,
			tail:     newLogTail(400),
		})
	}
	return c
}

// start launches every server and waits until all of them serve (and, for an
// ensemble, agree on a leader).
// Ports are reserved (ports.go) but released before the JVM binds them, so
// a process that does not honour the reservations can take one in between;
// the server then exits with a BindException and we retry on fresh ports.
func (c *Cluster) start() error {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.StartTimeout)
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
		if c.cfg.BeforeLaunch != nil {
			c.cfg.BeforeLaunch(c.Addrs())
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
			c.log.Logf("zktest: a port was taken before ZooKeeper could bind it; retrying on new ports")
			for _, s := range c.servers {
				_ = s.kill()
			}
			continue
		}
		return fmt.Errorf("zktest: ZooKeeper (%s) did not become healthy: %w%s", c.inst, err, c.logTails(40))
	}
}

// allocatePorts picks free ports (ports.go), holding all listeners until
// every port is chosen so none is handed out twice, and keeps their
// reservations until Shutdown (a restarted server binds them again).
func (c *Cluster) allocatePorts() error {
	per := 1
	if len(c.servers) > 1 || c.cfg.Reconfig {
		per = 3 // client, quorum, election
	}
	c.releasePorts() // a retry's new ports replace the old
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	low, high := portRange()
	ports := make([]int, 0, per*len(c.servers))
	for range per * len(c.servers) {
		lk, l, err := takePort(low, high)
		if err != nil {
			return fmt.Errorf("zktest: allocating a loopback port: %w", err)
		}
		lns = append(lns, l)
		c.ports = append(c.ports, lk)
		ports = append(ports, lk.port)
	}
	for i, s := range c.servers {
		s.clientPort = ports[i*per]
		if i == 0 && c.cfg.ClientPort != 0 {
			s.clientPort = c.cfg.ClientPort
		}
		if per == 3 {
			s.quorumPort, s.electionPort = ports[i*per+1], ports[i*per+2]
		}
		s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.clientPort))
	}
	return nil
}

// releasePorts drops the ports' reservations.
func (c *Cluster) releasePorts() {
	for _, p := range c.ports {
		p.release()
	}
	c.ports = nil
}

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

// Shutdown kills every server (no need to be graceful: the data goes away),
// removes the data a Start created, and silences the log, since a test's
// Logf panics once the test is complete. Only the first call does anything.
func (c *Cluster) Shutdown() {
	c.stopOnce.Do(func() {
		for _, s := range c.servers {
			_ = s.kill()
		}
		c.log.Close()
		c.releasePorts()
		if c.baseDir != "" {
			_ = os.RemoveAll(c.baseDir)
		}
	})
}

// External reports whether the servers are external.
func (c *Cluster) External() bool { return c.external }

// Addrs returns the client address ("127.0.0.1:port") of every server, in
// order (the voters, then the observers), including stopped ones but not
// those a reconfig removed.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, s := range c.members() {
		out = append(out, s.Addr())
	}
	return out
}

// Servers returns the servers in order; index i is server id i+1.
func (c *Cluster) Servers() []*Server { return append([]*Server(nil), c.servers...) }

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
		mode, err := c.serverMode(ctx, s.Addr())
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
	serving, voting, leaders := 0, 0, 0
	for _, s := range c.members() {
		if !s.Running() {
			if all {
				return &exitedError{s}
			}
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		mode, err := c.serverMode(cctx, s.Addr())
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
			voting++
			serving++
		case "follower":
			voting++
			serving++
		case "observer":
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
		if voters := c.voters(); voting < voters/2+1 {
			return fmt.Errorf("only %d of %d voting servers serve: no quorum", voting, voters)
		}
	}
	return nil
}

// voters is how many servers vote (all but the observers).
func (c *Cluster) voters() int {
	n := 0
	for _, s := range c.members() {
		if !s.observer {
			n++
		}
	}
	return n
}

// logTails renders the last n lines of every local server's output.
func (c *Cluster) logTails(n int) string {
	var b strings.Builder
	for _, s := range c.servers {
		if s.tail != nil {
			b.WriteString(s.tailString(n))
		}
	}
	return b.String()
}
