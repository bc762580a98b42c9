package zklock

import (
	"context"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// Following the ensemble's membership. ZooKeeper 3.5 and later keep the
// ensemble's dynamic configuration in /zookeeper/config: one line per
// server, with the address its clients reach it at after the semicolon
// ("server.4=10.0.0.4:2888:3888:participant;10.0.0.4:2181"). A reconfig
// changes it while the ensemble serves; a client that keeps dialling the
// addresses it was given loses the ensemble once every one of them has
// left it. The tracker gives the client's dialler the servers the
// configuration lists, from its next connection on.
//
// It follows only a configuration it can trust to be reachable from here:
// every server's client address is a host, not a wildcard, and every
// address the client was given is among them (the client was pointed at
// the members themselves, not at a load balancer or a name that hides
// them). Otherwise it leaves the given list alone and sets no watch.

// configNode is where ZooKeeper keeps the dynamic configuration.
const configNode = "/zookeeper/config"

// ensembleConfig is what the tracker reads of /zookeeper/config.
type ensembleConfig struct {
	clients []string // every server's client address, host:port, in the config's order
	version string   // the config's version line ("" if none)
}

// parseEnsembleConfig reads a /zookeeper/config body. ok is false when a
// server line names no client address, or one a client cannot dial (a
// wildcard host), or when there is no server line.
func parseEnsembleConfig(data []byte) (cfg ensembleConfig, ok bool) {
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		key, value, found := strings.Cut(line, "=")
		switch {
		case !found:
			continue
		case key == "version":
			cfg.version = value
		case strings.HasPrefix(key, "server."):
			addr, good := clientAddress(value)
			if !good {
				return ensembleConfig{}, false
			}
			cfg.clients = append(cfg.clients, addr)
		}
	}
	return cfg, len(cfg.clients) > 0
}

// clientAddress is the client address of a server line's value
// ("peer:q:e[:role];[host:]port"): host:port, or false when it has none or
// a wildcard host.
func clientAddress(value string) (string, bool) {
	_, client, found := strings.Cut(value, ";")
	if !found {
		return "", false
	}
	host, port, err := net.SplitHostPort(strings.TrimSpace(client))
	if err != nil || port == "" || host == "" {
		return "", false
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return "", false
	}
	return net.JoinHostPort(host, port), true
}

// followable reports whether a client given addrs may dial what cfg lists
// instead: each given address is one of cfg's (compared as host:port).
func (cfg ensembleConfig) followable(addrs []string) bool {
	for _, a := range addrs {
		if !slices.Contains(cfg.clients, a) {
			return false
		}
	}
	return len(addrs) > 0
}

// ensembleTracker follows the ensemble's configuration for one client: it
// owns the configuration last followed, and runs until the client closes.
type ensembleTracker struct {
	c   *Client
	cfg ensembleConfig
}

// followEnsemble reads the configuration once (within ctx) and, when c may
// follow it (WithFollowEnsemble, a dialler of zklock's own, a followable
// config), starts the goroutine that follows it.
func followEnsemble(ctx context.Context, c *Client, addrs []string) {
	if !c.opts.followEnsemble || c.wire == nil {
		return
	}
	data, err := call(ctx, c, func() ([]byte, error) {
		data, _, err := c.conn.Get(configNode)
		return data, err
	})
	if err != nil {
		c.log.Debug("zklock: not following the ensemble's configuration: it could not be read", "err", err)
		return
	}
	cfg, ok := parseEnsembleConfig(data)
	if !ok || !cfg.followable(addrs) {
		c.log.Debug("zklock: not following the ensemble's configuration: it does not list the servers given with their client addresses", "config", string(data))
		return
	}
	t := &ensembleTracker{c: c, cfg: cfg}
	t.use()
	c.spawn(t.run)
}

// run watches the configuration until the client closes, and gives the
// dialler each new list of servers.
func (t *ensembleTracker) run() {
	c := t.c
	for {
		data, watch, err := t.readW()
		switch classify(err) {
		case errNone:
			if next, ok := parseEnsembleConfig(data); ok && next.version != t.cfg.version {
				t.cfg = next
				t.use()
			}
		case errRefused, errStop:
			if !c.isClosed() {
				c.log.Warn("zklock: no longer following the ensemble's configuration", "err", err)
			}
			return
		default: // the connection or the session: read again once it is back
			select {
			case <-time.After(time.Second):
				continue
			case <-c.closing:
				return
			}
		}
		select {
		case <-watch:
		case <-c.closing:
			return
		}
	}
}

// readW reads the configuration and sets a watch on it, or gives up with
// ErrClosed when the client closes first.
func (t *ensembleTracker) readW() ([]byte, <-chan zk.Event, error) {
	type read struct {
		data  []byte
		watch <-chan zk.Event
	}
	c := t.c
	r, err := await(context.Background(), c, goCall(c, func() (read, error) {
		data, _, watch, err := c.conn.GetW(configNode)
		return read{data, watch}, err
	}))
	return r.data, r.watch, err
}

// use hands the followed configuration's client addresses to the dialler.
func (t *ensembleTracker) use() {
	w, servers := t.c.wire, t.cfg.clients
	if slices.Equal(w.Servers(), servers) {
		return
	}
	if err := w.SetServers(servers); err != nil {
		t.c.log.Warn("zklock: the ensemble's new servers could not be used", "servers", servers, "err", err)
		return
	}
	t.c.log.Info("zklock: following the ensemble's configuration", "servers", servers, "version", t.cfg.version)
}

// Servers returns the addresses the client dials: those it was given, or,
// once the ensemble's membership changed (a reconfig) and the client follows
// it (WithFollowEnsemble), those the ensemble's configuration lists. nil for
// a client made with NewClient, whose connection is the caller's.
func (c *Client) Servers() []string {
	if c.wire == nil {
		return nil
	}
	return c.wire.Servers()
}
