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
//  3. Only from a checkout of zklock (a clone, or a workspace that uses
//     one): a container of the official zookeeper:3.8 image, started with
//     testcontainers-go, when a Docker engine answers (standalone only, no
//     server fault helpers; the code is the separate module
//     zktest/zkcontainer, which Go leaves out of zklock's module download,
//     so zktest imported from the module cache cannot start it).
//  4. Otherwise the test fails with InstallHint: `make test` in a checkout
//     installs ZooKeeper; scripts/install-zookeeper.sh does, from a
//     checkout or the module's directory; or set ZKLOCK_TEST_SERVERS, for
//     instance to a zookeeper:3.8 container started by hand (the hint has
//     the docker run line).
//
// Client-side faults (partitions, pauses, resets) do not need control of the
// server and work with external servers too: see Proxy.
//
// Faults between servers need servers started here. WithPartitions routes
// every connection between the servers of an ensemble through a Proxy of its
// own, and Cluster.Partition cuts one server off from the others while its
// clients still reach it (Cluster.Heal ends the cut): the fault where a
// follower goes on answering its clients for syncLimit ticks after the
// leader has expired their sessions, which no client-side fault can show.
package zktest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zklock/zklock/internal/zkserver"
)

// EnvServers names the environment variable (ZKLOCK_TEST_SERVERS) that points
// the tests at externally managed servers instead of starting local ones.
const EnvServers = zkserver.EnvServers

// InstallHint tells a developer how to get a ZooKeeper for the tests (`make
// test`, scripts/install-zookeeper.sh, ZKLOCK_TEST_SERVERS, a container run
// by hand); it is part of every "no ZooKeeper" failure. Every way it names
// works for a user of the module as downloaded.
const InstallHint = zkserver.InstallHint

// DefaultStartTimeout (60s) bounds how long starting (or restarting) servers
// may take before the harness gives up and reports the server log.
const DefaultStartTimeout = zkserver.DefaultStartTimeout

// ErrExternal is returned by server lifecycle methods on servers named in
// ZKLOCK_TEST_SERVERS when no testing.TB is available to skip (StartMain).
var ErrExternal = zkserver.ErrExternal

// ErrNotRunning is returned by Server.Freeze, Thaw and Pause on a server that
// is not running.
var ErrNotRunning = zkserver.ErrNotRunning

// Start returns a running ZooKeeper cluster for the test, torn down by
// t.Cleanup, found in the four ways the package doc lists. It fails the test
// with instructions when there is none, and skips it only when the external
// servers cannot give what it asks for (a larger ensemble, TLS, a maximum
// session timeout).
func Start(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	cfg := newConfig(opts)
	if !cfg.logfSet {
		cfg.Logf = t.Logf
	}
	if ext := externalServers(); len(ext) > 0 {
		if cfg.TLS != nil {
			t.Skipf("zktest: test needs a TLS server started here; %s is set", EnvServers)
		}
		if cfg.Observers > 0 {
			t.Skipf("zktest: test needs observers started here; %s is set", EnvServers)
		}
		if cfg.partitions {
			t.Skipf("zktest: test needs servers started here to partition them; %s is set", EnvServers)
		}
		if len(cfg.ClockShifts) > 0 {
			t.Skipf("zktest: test needs servers with shifted clocks started here; %s is set", EnvServers)
		}
		if cfg.MaxSessionTimeout > 0 {
			t.Skipf("zktest: test needs a server with a maximum session timeout of %v started here; %s is set", cfg.MaxSessionTimeout, EnvServers)
		}
		if cfg.Ensemble > len(ext) {
			t.Skipf("zktest: test needs a %d-server ensemble but %s names %d server(s)", cfg.Ensemble, EnvServers, len(ext))
		}
		c, err := useExternal(ext, cfg)
		if err != nil {
			t.Fatalf("%v", err)
		}
		return wrap(c, t)
	}
	c, stop, err := startLocal(cfg, t)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(stop)
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
		if cfg.TLS != nil {
			return nil, nil, fmt.Errorf("zktest: a TLS cluster needs servers started here; %s is set", EnvServers)
		}
		if cfg.Observers > 0 {
			return nil, nil, fmt.Errorf("zktest: observers need servers started here; %s is set", EnvServers)
		}
		if cfg.partitions {
			return nil, nil, fmt.Errorf("zktest: partitions need servers started here; %s is set", EnvServers)
		}
		if len(cfg.ClockShifts) > 0 {
			return nil, nil, fmt.Errorf("zktest: servers with shifted clocks need servers started here; %s is set", EnvServers)
		}
		if cfg.MaxSessionTimeout > 0 {
			return nil, nil, fmt.Errorf("zktest: a maximum session timeout needs servers started here; %s is set", EnvServers)
		}
		if cfg.Ensemble > len(ext) {
			return nil, nil, fmt.Errorf("zktest: a %d-server ensemble was requested but %s names %d server(s)", cfg.Ensemble, EnvServers, len(ext))
		}
		c, err := useExternal(ext, cfg)
		if err != nil {
			return nil, nil, err
		}
		return wrap(c, nil), func() {}, nil
	}
	return startLocal(cfg, nil)
}

// startLocal starts the servers cfg asks for here (or in Docker), with the
// proxies between them that WithPartitions asks for; the function it
// returns stops the servers, then closes the proxies.
func startLocal(cfg config, tb testing.TB) (*Cluster, func(), error) {
	var parts *partitions
	if cfg.partitions {
		if cfg.Ensemble+cfg.Observers < 2 {
			return nil, nil, errors.New("zktest: WithPartitions needs an ensemble (WithEnsemble); a standalone server has no peers")
		}
		parts = newPartitions()
		cfg.PeerPort = parts.peerPort
	}
	c, stop, err := zkserver.Start(cfg.Config)
	if err != nil {
		parts.close()
		return nil, nil, err
	}
	w := wrap(c, tb)
	w.parts = parts
	return w, func() { stop(); parts.close() }, nil
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

// useExternal returns the servers named in ZKLOCK_TEST_SERVERS (addrs) once
// they serve.
func useExternal(addrs []string, cfg config) (*zkserver.Cluster, error) {
	c := zkserver.NewExternal(addrs, cfg.Config)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitHealthy(ctx); err != nil {
		return nil, fmt.Errorf("zktest: %s=%s is not usable: %w", EnvServers, os.Getenv(EnvServers), err)
	}
	return c, nil
}
