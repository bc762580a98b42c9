package zktest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zklock/zklock/internal/zkserver"
)

// Client is a go-zookeeper connection for tests. It records every session
// event (go-zookeeper's event channel is small and silently drops events that
// nobody reads), so a test can wait for "disconnected, then reconnected"
// instead of sleeping. It logs through t.Logf and is closed by t.Cleanup.
type Client struct {
	*zk.Conn

	mu      sync.Mutex
	events  []zk.Event
	cursor  int           // WaitState consumes events up to here
	changed chan struct{} // closed and replaced on every new event
	log     *zkserver.Log
}

// Connect connects to servers (Cluster.Addrs() or a Proxy.Addr()) with the
// given session timeout and waits up to 30s for a session; the test fails if
// none is established. opts are go-zookeeper options (zk.WithDialer, ...);
// do not pass zk.WithEventCallback, Client installs its own.
func Connect(t testing.TB, servers []string, sessionTimeout time.Duration, opts ...func(*zk.Conn)) *Client {
	t.Helper()
	c := &Client{changed: make(chan struct{}), log: zkserver.NewLog(t.Logf)}
	// The handshake bound first: a dialer among opts replaces it.
	zopts := []func(*zk.Conn){zk.WithDialer(handshakeDialer(handshakeBound(sessionTimeout))), zk.WithLogger(logger{c.log})}
	zopts = append(zopts, opts...)
	zopts = append(zopts, zk.WithEventCallback(c.record))
	// go-zookeeper's option type is unexported; one func(*zk.Conn) that
	// applies them all is assignable to it.
	all := func(conn *zk.Conn) {
		for _, o := range zopts {
			o(conn)
		}
	}
	conn, _, err := zk.Connect(servers, sessionTimeout, all)
	if err != nil {
		t.Fatalf("zktest: connect %v: %v", servers, err)
	}
	c.Conn = conn
	t.Cleanup(func() {
		conn.Close()
		c.log.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitState(ctx, zk.StateHasSession); err != nil {
		t.Fatalf("zktest: no session with %v: %v", servers, err)
	}
	return c
}

func (c *Client) record(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	c.mu.Lock()
	c.events = append(c.events, ev)
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// WaitState waits for the next session event with the given state after the
// events consumed by previous WaitState calls, and consumes it (and everything
// before it). Waiting for StateDisconnected then StateHasSession therefore
// observes a reconnect in order.
func (c *Client) WaitState(ctx context.Context, want zk.State) error {
	for {
		c.mu.Lock()
		for i := c.cursor; i < len(c.events); i++ {
			if c.events[i].State == want {
				c.cursor = i + 1
				c.mu.Unlock()
				return nil
			}
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %v: %w (session events so far: %v)", want, ctx.Err(), c.States())
		}
	}
}

// States returns the states of all session events so far, oldest first.
func (c *Client) States() []zk.State {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]zk.State, len(c.events))
	for i, e := range c.events {
		out[i] = e.State
	}
	return out
}

type logger struct{ g *zkserver.Log }

func (l logger) Printf(format string, args ...any) { l.g.Logf("zk client: "+format, args...) }
