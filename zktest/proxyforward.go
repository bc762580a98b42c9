package zktest

// The proxy's forwarding: accepting a client, dialing a target, and the two
// pumps of each pair that hold bytes while the proxy stalls, delay them,
// and close or reset both sides.

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// pair is one proxied connection: client side and server side.
type pair struct {
	p              *Proxy
	client, server net.Conn
	done           chan struct{}
	once           sync.Once
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			time.Sleep(10 * time.Millisecond) // e.g. EMFILE: back off
			p.mu.Lock()
			closed := p.closed
			p.mu.Unlock()
			if closed {
				return
			}
			continue
		}
		p.mu.Lock()
		if p.closed || p.blocked {
			p.mu.Unlock()
			p.refused.Add(1)
			reset(c)
			continue
		}
		p.wg.Add(1)
		p.mu.Unlock()
		go p.handle(c)
	}
}

func (p *Proxy) handle(c net.Conn) {
	defer p.wg.Done()
	s, err := p.dialTarget()
	if err != nil {
		p.refused.Add(1)
		reset(c)
		return
	}
	pr := &pair{p: p, client: c, server: s, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		reset(c)
		reset(s)
		return
	}
	p.pairs[pr] = struct{}{}
	p.wg.Add(2)
	p.mu.Unlock()
	p.accepted.Add(1)
	delay := time.Duration(p.delay.Load())
	go pr.pump(c, s, delay, &p.toServer)
	go pr.pump(s, c, delay, &p.toClient)
}

// dialTarget connects to the next target that accepts, trying each in turn,
// and again every redialEvery for as long as the proxy's redial allows.
func (p *Proxy) dialTarget() (net.Conn, error) {
	deadline := time.Now().Add(p.redial)
	for {
		c, err := p.dialOnce()
		if err == nil || !time.Now().Before(deadline) {
			return c, err
		}
		select {
		case <-p.ctx.Done():
			return nil, err
		case <-time.After(redialEvery):
		}
	}
}

// redialEvery is how often a proxy with redial tries its targets again.
const redialEvery = 20 * time.Millisecond

// dialOnce tries every target once, in round-robin order.
func (p *Proxy) dialOnce() (net.Conn, error) {
	var errs []error
	for range p.targets {
		p.mu.Lock()
		t := p.targets[p.next%len(p.targets)]
		p.next++
		p.mu.Unlock()
		d := net.Dialer{Timeout: 2 * time.Second}
		c, err := d.DialContext(p.ctx, "tcp", t)
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// waitFlowing blocks while the proxy is stalled (for replies, also while
// replies are stalled). It reports false if the connection was shut meanwhile.
func (p *Proxy) waitFlowing(done <-chan struct{}, reply bool) bool {
	for {
		p.mu.Lock()
		ch, rch := p.resume, p.replies
		p.mu.Unlock()
		if !reply {
			rch = closedChan
		}
		select {
		case <-done:
			return false
		case <-ch:
		}
		select {
		case <-done:
			return false
		case <-rch:
		}
		p.mu.Lock()
		flowing := ch == p.resume && (!reply || rch == p.replies)
		p.mu.Unlock()
		if flowing {
			return true
		}
	}
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// pump copies src to dst, holding each chunk while the proxy is stalled, and
// for delay (if any) after it was read. A read error (the peer closed) is
// also held, then closes the pair.
func (pr *pair) pump(src, dst net.Conn, delay time.Duration, count *atomic.Int64) {
	defer pr.p.wg.Done()
	reply := src == pr.server
	out := pr.directWriter(dst, reply, count)
	if delay > 0 {
		out = pr.delayedWriter(dst, reply, count, delay)
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !out(buf[:n], nil) {
			return
		}
		if err != nil {
			out(nil, err)
			return
		}
	}
}

// A chunkWriter forwards one chunk read (or the read error that ended the
// stream, which shuts the pair once everything before it is delivered). It
// reports false once the pair is shut.
type chunkWriter func(b []byte, readErr error) bool

func (pr *pair) directWriter(dst net.Conn, reply bool, count *atomic.Int64) chunkWriter {
	return func(b []byte, readErr error) bool {
		if !pr.p.waitFlowing(pr.done, reply) {
			return false
		}
		if readErr != nil {
			pr.shut(false)
			return false
		}
		if _, err := dst.Write(b); err != nil {
			pr.shut(false)
			return false
		}
		count.Add(int64(len(b)))
		return true
	}
}

// delayedWriter hands chunks to a goroutine that forwards each one delay
// after it was read, in order.
func (pr *pair) delayedWriter(dst net.Conn, reply bool, count *atomic.Int64, delay time.Duration) chunkWriter {
	type chunk struct {
		b   []byte
		err error
		due time.Time
	}
	queue := make(chan chunk, 1024)
	direct := pr.directWriter(dst, reply, count)
	pr.p.wg.Add(1)
	go func() {
		defer pr.p.wg.Done()
		for {
			select {
			case c := <-queue:
				if wait := time.Until(c.due); wait > 0 {
					time.Sleep(wait)
				}
				if !direct(c.b, c.err) {
					return
				}
			case <-pr.done:
				return
			}
		}
	}()
	return func(b []byte, readErr error) bool {
		select {
		case queue <- chunk{append([]byte(nil), b...), readErr, time.Now().Add(delay)}:
			return readErr == nil
		case <-pr.done:
			return false
		}
	}
}

// shut closes both sides once; with rst the peers get a TCP reset.
func (pr *pair) shut(rst bool) {
	pr.once.Do(func() {
		close(pr.done)
		if rst {
			reset(pr.client)
			reset(pr.server)
		} else {
			pr.client.Close()
			pr.server.Close()
		}
		pr.p.mu.Lock()
		delete(pr.p.pairs, pr)
		pr.p.mu.Unlock()
	})
}

// reset closes c with SO_LINGER 0 so the peer gets RST instead of FIN.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
