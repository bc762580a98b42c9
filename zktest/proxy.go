package zktest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of one or more ZooKeeper
// addresses. Point one client at Proxy.Addr() to inject faults into that
// client's connection only, without touching the servers: a stall models a
// network partition or a long GC pause, Cut models a connection reset, Block
// models a server that is unreachable.
//
// Each accepted connection is forwarded to the targets in round-robin order
// (skipping targets that refuse), so a client that reconnects through the
// proxy may land on another server, as with a real server list.
type Proxy struct {
	ln      net.Listener
	targets []string
	ctx     context.Context // cancelled by Close; aborts dials
	cancel  context.CancelFunc
	redial  time.Duration // how long to keep dialing targets that refuse; 0: once

	mu      sync.Mutex
	stalled bool
	resume  chan struct{} // closed when a stall ends
	replies chan struct{} // closed while replies (server to client) flow; see StallReplies
	blocked bool
	closed  bool
	next    int
	pairs   map[*pair]struct{}
	wg      sync.WaitGroup

	accepted atomic.Int64
	refused  atomic.Int64
	delay    atomic.Int64 // one-way delay in ns, for connections made from now on
	toServer atomic.Int64 // bytes forwarded
	toClient atomic.Int64
}

// NewProxy starts a proxy listening on 127.0.0.1:0 in front of targets; it is
// closed by t.Cleanup.
func NewProxy(t testing.TB, targets ...string) *Proxy {
	t.Helper()
	p, err := ListenProxy(targets...)
	if err != nil {
		t.Fatalf("zktest: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// ListenProxy is NewProxy without a testing.TB (e.g. for TestMain); the caller
// must Close it.
func ListenProxy(targets ...string) (*Proxy, error) { return listenProxy(0, targets...) }

// listenProxy is ListenProxy with a proxy that keeps dialing its targets for
// up to redial before it gives up on an accepted connection.
func listenProxy(redial time.Duration, targets ...string) (*Proxy, error) {
	if len(targets) == 0 {
		return nil, errors.New("proxy needs at least one target")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy listen: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		ln:      ln,
		targets: append([]string(nil), targets...),
		ctx:     ctx,
		cancel:  cancel,
		redial:  redial,
		resume:  make(chan struct{}),
		replies: make(chan struct{}),
		pairs:   map[*pair]struct{}{},
	}
	close(p.resume)
	close(p.replies)
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr returns the proxy's address, "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Stall stops forwarding bytes in both directions on every connection while
// keeping the connections open, like a partition or a process pause. New
// connections are accepted (and connected to a target) but stalled too.
//
// Bytes are held, not dropped: after Resume everything that was sent during
// the stall is delivered in order, including closes (a client that gave up
// and closed during the stall is seen closing by the server only after
// Resume). That is what a paused process or a healed partition with TCP
// retransmission looks like. The proxy holds at most one read buffer per
// direction per connection; beyond that TCP flow control pushes back on the
// sender. Bytes the proxy had already read and let through when Stall was
// called may still be delivered.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stalled {
		p.stalled = true
		p.resume = make(chan struct{})
	}
}

// Resume ends a stall: held bytes are delivered in order and forwarding
// continues.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled {
		p.stalled = false
		close(p.resume)
	}
	select {
	case <-p.replies:
	default:
		close(p.replies)
	}
}

// StallReplies holds what servers send to clients, while requests still flow
// from clients to servers: a request reaches the server, and its reply is
// lost if the connection is then Cut. Resume ends it.
func (p *Proxy) StallReplies() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.replies:
		p.replies = make(chan struct{})
	default:
	}
}

// Cut closes every current connection at once, on both sides, with a TCP
// reset (SO_LINGER 0), dropping any held bytes. New connections are still
// accepted (unless blocked), so the client can reconnect.
func (p *Proxy) Cut() {
	p.mu.Lock()
	ps := make([]*pair, 0, len(p.pairs))
	for pr := range p.pairs {
		ps = append(ps, pr)
	}
	p.mu.Unlock()
	for _, pr := range ps {
		pr.shut(true)
	}
}

// Block makes the proxy refuse new connections (accept, then reset at once)
// while b is true. Existing connections are not affected; combine with Cut to
// make a server unreachable for a client.
func (p *Proxy) Block(b bool) {
	p.mu.Lock()
	p.blocked = b
	p.mu.Unlock()
}

// SetDelay makes every connection accepted from now on hold each chunk of
// bytes for d in each direction before forwarding it, like a client in
// another rack or zone: a round trip then costs 2d more. Bytes keep their
// order and are not rate-limited, so pipelined requests still overlap.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// Bytes returns how many bytes the proxy has forwarded to servers and to
// clients.
func (p *Proxy) Bytes() (toServer, toClient int64) { return p.toServer.Load(), p.toClient.Load() }

// ActiveConns returns the number of connections currently proxied.
func (p *Proxy) ActiveConns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pairs)
}

// Accepted returns how many connections were accepted and forwarded.
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

// Refused returns how many connections were refused because of Block or
// because no target could be reached.
func (p *Proxy) Refused() int64 { return p.refused.Load() }

// Close stops listening, resets every connection and waits for the proxy's
// goroutines to finish.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	ps := make([]*pair, 0, len(p.pairs))
	for pr := range p.pairs {
		ps = append(ps, pr)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.cancel()
	for _, pr := range ps {
		pr.shut(true)
	}
	p.wg.Wait()
	return err
}
