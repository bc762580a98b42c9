package main

// exec and status against servers that refuse the connection give up after
// refusedGiveUp, not after the whole --connect-timeout: a refused port is
// a server that is down or a wrong --servers, seldom one about to come up.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zklock/zklock"
)

// refusedGiveUp is how long every server must refuse the connection before
// exec or status gives up (etcdctl's dial timeout is 2 s as well).
const refusedGiveUp = 2 * time.Second

// refusedProbe is how often the servers are tried meanwhile; the first try
// comes after one interval, so a session made at once costs no extra dial.
const refusedProbe = 250 * time.Millisecond

// errAllRefused ends a connect whose servers all refused for refusedGiveUp.
var errAllRefused = fmt.Errorf("every server refused the connection for %v", refusedGiveUp)

// connectOrRefused is connect, ended after refusedGiveUp (or
// --connect-timeout, if shorter) when every server refuses the connection
// all along. Its error then matches zklock.ErrUnreachable and names the
// refusal.
func (cf *connFlags) connectOrRefused(ctx context.Context, opts ...zklock.Option) (*zklock.Client, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if allRefuse(cf.dialAddrs(), stop) {
			cancel(errAllRefused)
		}
	}()
	c, err := cf.connect(ctx, opts...)
	close(stop)
	wg.Wait()
	if err != nil && errors.Is(context.Cause(ctx), errAllRefused) {
		return nil, fmt.Errorf("%w: %w (%s)", zklock.ErrUnreachable, errAllRefused, strings.Join(cf.dialAddrs(), ","))
	}
	return c, err
}

// dialAddrs are the servers' host:port addresses, without the chroot.
func (cf *connFlags) dialAddrs() []string {
	addrs := cf.list()
	if n := len(addrs); n > 0 {
		if i := strings.IndexByte(addrs[n-1], '/'); i >= 0 {
			addrs[n-1] = addrs[n-1][:i]
		}
	}
	return addrs
}

// allRefuse dials every address every refusedProbe and reports true once
// all of them have refused every dial for refusedGiveUp; false as soon as
// one does anything else (accepts, times out: something is there, or a
// network between), or when stop closes.
func allRefuse(addrs []string, stop <-chan struct{}) bool {
	begin := time.Now()
	t := time.NewTicker(refusedProbe)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return false
		case <-t.C:
		}
		for _, a := range addrs {
			c, err := net.DialTimeout("tcp", a, refusedProbe)
			if err == nil {
				c.Close()
				return false
			}
			if !errors.Is(err, syscall.ECONNREFUSED) {
				return false
			}
		}
		if time.Since(begin) >= refusedGiveUp {
			return true
		}
	}
}
