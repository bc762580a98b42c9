package main

// exec --value V --http ADDR: leadership a probe can read, served while
// exec campaigns and while its command runs.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/leaderprobe"
)

// execProbe is the --http server and the probe it serves, set once the
// election exists.
type execProbe struct {
	ln     net.Listener
	srv    *http.Server
	probe  *leaderprobe.Probe
	cancel context.CancelFunc
}

// listenProbe opens --http's address before exec queues, so that a taken
// port is reported at once (exit 1). It returns 0, or the exit code.
func (o *execOpts) listenProbe(stderr io.Writer) int {
	if o.httpAt == "" {
		return exitOK
	}
	ln, err := net.Listen("tcp", o.httpAt)
	if err != nil {
		return fail(stderr, exitFailure, "cannot listen on --http %s: %v; choose another address", o.httpAt, err)
	}
	o.probe = &execProbe{ln: ln}
	fmt.Fprintf(stderr, "zklock: serving leadership of %s on http://%s/leader\n", o.path, ln.Addr())
	return exitOK
}

// startProbe serves /leader and /healthz for e until stopProbe.
func (o *execOpts) startProbe(e *zklock.Election) *leaderprobe.Probe {
	if o.probe == nil {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := o.probe
	p.probe, p.cancel = leaderprobe.New(ctx, e), cancel
	p.srv = &http.Server{Handler: p.probe, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(p.ln) }()
	return p.probe
}

// stopProbe stops serving, within about 1s.
func (o *execOpts) stopProbe() {
	p := o.probe
	if p == nil {
		return
	}
	if p.srv == nil {
		p.ln.Close()
		return
	}
	p.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if p.srv.Shutdown(ctx) != nil {
		_ = p.srv.Close()
	}
}
