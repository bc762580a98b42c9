package zktest

import (
	"context"
	"crypto/tls"
	"fmt"
	"testing"
	"time"

	"github.com/zklock/zklock/internal/zkserver"
)

// Cluster is a set of ZooKeeper servers serving one namespace: either
// processes started by this package, or external servers.
type Cluster struct {
	c       *zkserver.Cluster
	servers []*Server
	tb      testing.TB  // nil for StartMain
	parts   *partitions // nil without WithPartitions
}

// wrap gives c the harness's methods; tb is the test to skip when a lifecycle
// method is called on an external server (nil: return ErrExternal).
func wrap(c *zkserver.Cluster, tb testing.TB) *Cluster {
	w := &Cluster{c: c, tb: tb}
	for _, s := range c.Servers() {
		w.servers = append(w.servers, &Server{s: s, c: w})
	}
	return w
}

// External reports whether the servers are external (ZKLOCK_TEST_SERVERS).
func (c *Cluster) External() bool { return c.c.External() }

// SkipIfExternal skips the test when the servers are external, for tests that
// need control of the server processes or exact server metrics.
func (c *Cluster) SkipIfExternal(t testing.TB) {
	t.Helper()
	if c.External() {
		t.Skipf("zktest: needs locally started ZooKeeper servers; %s is set", EnvServers)
	}
}

// Addrs returns the client address ("127.0.0.1:port") of every server, in
// order (the voters, then any observers), including stopped ones; pass it to
// zk.Connect.
func (c *Cluster) Addrs() []string { return c.c.Addrs() }

// Servers returns the servers in order; index i is server id i+1.
func (c *Cluster) Servers() []*Server { return append([]*Server(nil), c.servers...) }

// Mntr returns the `mntr` output of server i, over TLS for a TLS cluster.
func (c *Cluster) Mntr(i int) (Mntr, error) {
	if i < 0 || i >= len(c.servers) {
		return nil, fmt.Errorf("zktest: no server %d", i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addr := c.servers[i].Addr()
	m := c.c.TLS()
	if m == nil {
		return GetMntr(ctx, addr)
	}
	out, err := zkserver.FourLetterTLS(ctx, addr, "mntr", m.ClientConfig())
	if err != nil {
		return nil, err
	}
	return mntrReply(addr, out)
}

// Leader returns the index of the server that currently leads (0 for a
// standalone server). Only running servers are asked.
func (c *Cluster) Leader() (int, error) { return c.c.Leader() }

// WaitHealthy waits until every running server serves clients and, for an
// ensemble, exactly one of them leads and a quorum is up. It polls; ctx bounds
// the wait.
func (c *Cluster) WaitHealthy(ctx context.Context) error { return c.c.WaitHealthy(ctx) }

// TLSFiles names the PEM files of a TLS cluster (WithTLS): the CA, the
// client certificate and its key, for clients that read files (the CLI).
type TLSFiles struct {
	CA, ClientCert, ClientKey string
	// ClientName is the client certificate's subject common name.
	ClientName string
}

// TLSConfig returns a client tls.Config for a TLS cluster (WithTLS): it
// trusts the cluster's CA and presents the client certificate. It is nil
// for a plain cluster. Each call returns a new config.
func (c *Cluster) TLSConfig() *tls.Config {
	m := c.c.TLS()
	if m == nil {
		return nil
	}
	return m.ClientConfig()
}

// TLSFiles returns the PEM files of a TLS cluster, or nil for a plain one.
func (c *Cluster) TLSFiles() *TLSFiles {
	m := c.c.TLS()
	if m == nil {
		return nil
	}
	return &TLSFiles{CA: m.CAFile, ClientCert: m.ClientCertFile, ClientKey: m.ClientKeyFile, ClientName: m.ClientName}
}

// NewClientCert issues another client certificate for a TLS cluster, signed
// by its CA, with subject CN=name: a second identity on ZooKeeper's x509
// scheme, under which ACLs protect the nodes each identity creates. It
// returns a client config presenting it and its files (ClientName is name),
// or an error for a plain cluster.
func (c *Cluster) NewClientCert(name string) (*tls.Config, *TLSFiles, error) {
	m := c.c.TLS()
	if m == nil {
		return nil, nil, fmt.Errorf("zktest: %s is not a TLS cluster (WithTLS)", c.c.Addrs())
	}
	certFile, keyFile, cert, err := m.IssueClient(name)
	if err != nil {
		return nil, nil, fmt.Errorf("zktest: issuing a client certificate: %w", err)
	}
	cfg := &tls.Config{RootCAs: m.Roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	return cfg, &TLSFiles{CA: m.CAFile, ClientCert: certFile, ClientKey: keyFile, ClientName: name}, nil
}
