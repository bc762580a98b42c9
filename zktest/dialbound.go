package zktest

import (
	"net"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// A ZooKeeper restarted a moment ago may accept a connection while it is
// still starting and never answer its handshake (3.8 refuses the session,
// then fails to close the socket), and go-zookeeper waits for the answer
// for 6.7 session timeouts: a test client reconnecting in that window hangs
// long past any test's patience. Connect's clients give a connection a
// third of the session timeout (at least two seconds) to say anything, and
// dial again after that, as zklock's own clients do.

// handshakeDialer dials as go-zookeeper would, closing a connection that
// has read nothing within bound.
func handshakeDialer(bound time.Duration) zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, address, timeout)
		if err != nil {
			return nil, err
		}
		hc := &handshakeConn{Conn: c}
		time.AfterFunc(bound, func() {
			if !hc.answered.Load() {
				c.Close()
			}
		})
		return hc, nil
	}
}

// handshakeBound is how long a connection may stay silent before its first
// answer.
func handshakeBound(sessionTimeout time.Duration) time.Duration {
	return max(sessionTimeout/3, 2*time.Second)
}

// handshakeConn notes that the server said something.
type handshakeConn struct {
	net.Conn
	answered atomic.Bool
}

func (c *handshakeConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.answered.Store(true)
	}
	return n, err
}
