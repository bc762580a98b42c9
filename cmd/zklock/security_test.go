package main

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// The CLI on a TLS-only ensemble, with digest credentials from the
// environment: the holder's nodes are protected (all rights for its
// identity, read for everyone), so a stranger without credentials sees the
// queue with status but can neither queue, nor break the holder, nor delete
// its node with a library client; every refusal says the server refused.
func TestCLIOverTLSWithCredentials(t *testing.T) {
	zc := zktest.Start(t, zktest.WithTLS("want"))
	files := zc.TLSFiles()
	servers := strings.Join(zc.Addrs(), ",")
	path := lockPath(t)
	tlsFlags := []string{"--servers", servers, "--tls-ca", files.CA}

	t.Setenv(envAuth, "alice:secret")
	holder := start(t, append(append([]string{"exec"}, tlsFlags...), path, "--", "sleep", "30")...)
	cfg := zc.TLSConfig()
	c := tlsClient(t, zc, cfg)
	waitQueue(t, c, path, 1)

	t.Setenv(envAuth, "") // a stranger from here on
	code, out, errOut := runZK(t, 20*time.Second, append(append([]string{"status"}, tlsFlags...), path)...)
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "HOLDER", "status works without credentials")

	code, _, errOut = runZK(t, 20*time.Second, append(append([]string{"exec", "--try"}, tlsFlags...), path, "--", "true")...)
	require.NotEqual(t, exitOK, code)
	require.Contains(t, errOut, "refused")
	require.Contains(t, errOut, path)
	require.NotContains(t, errOut, "cannot reach")

	code, _, errOut = runZK(t, 20*time.Second, append(append([]string{"break", "--yes"}, tlsFlags...), path)...)
	require.Equal(t, exitFailure, code, errOut)
	require.Contains(t, errOut, "refused")
	require.Contains(t, errOut, "its ACL admits the user alice: give that user's credentials with $ZKLOCK_AUTH or --auth-file")

	// The CLI's errors name its flags, not the library's options.
	code, _, errOut = runZK(t, 20*time.Second, "status", "--servers", servers, "--connect-timeout", "2s", path)
	require.Equal(t, exitUnavailable, code, errOut)
	require.Contains(t, errOut, "give --tls-ca")
	require.NotContains(t, errOut, "WithTLS")
	code, _, errOut = runZK(t, 20*time.Second, "status", "--servers", strings.Join(cluster.Addrs(), ","), "--tls-ca", files.CA, "--connect-timeout", "2s", path)
	require.Equal(t, exitUnavailable, code, errOut)
	require.Contains(t, errOut, "a plain client port?")
	require.NotContains(t, errOut, "WithTLS")

	cs := contendersOf(t, c, path)
	require.Len(t, cs, 1)
	err := c.Conn().Delete(cs[0].Node, -1)
	require.ErrorIs(t, err, zk.ErrNoAuth, "a stranger deletes the holder's node")
	m, err := c.NewMutex(path)
	require.NoError(t, err)
	_, err = m.TryAcquire(context.Background())
	require.ErrorIs(t, err, zk.ErrNoAuth)
	require.ErrorContains(t, err, path)
	select {
	case <-holder.done:
		t.Fatal("the holder was disturbed")
	default:
	}
}

// Credentials never come from an argument, and a malformed file is a usage
// error before any dial.
func TestCLICredentialsFromAFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	require.NoError(t, os.WriteFile(bad, []byte("no-colon\n"), 0o600))
	code, _, errOut := runZK(t, 10*time.Second, "status", "--auth-file", bad, "/a")
	require.Equal(t, exitUsage, code, errOut)
	require.Contains(t, errOut, "credentials must be one line, user:password")
	// A readable file is refused, as ssh refuses a readable key.
	open := filepath.Join(dir, "open")
	require.NoError(t, os.WriteFile(open, []byte("alice:secret\n"), 0o600))
	require.NoError(t, os.Chmod(open, 0o644))
	code, out, errOut := runZK(t, 10*time.Second, "status", "--auth-file", open, "/a")
	require.Equal(t, exitUsage, code, errOut)
	require.Empty(t, out)
	require.Equal(t, "zklock: --auth-file "+open+": permissions 0644 let others read or change the credentials; run chmod 600 "+open+"; run 'zklock help status' for usage\n", errOut)
	code, _, errOut = runZK(t, 10*time.Second, "status", "--acl", "protected", "/a")
	require.Equal(t, exitUsage, code, errOut)
	require.Contains(t, errOut, "--acl protected needs an identity")
}

// tlsClient is a library client of the TLS cluster, without credentials.
func tlsClient(t *testing.T, zc *zktest.Cluster, cfg *tls.Config) *zklock.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := zklock.Connect(ctx, zc.Addrs(), zklock.WithTLS(cfg), zklock.WithSessionTimeout(4*time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// --servers takes a connect string with a chroot: a lock taken through it
// lives under the chroot, and status through it shows the path as given.
func TestCLIChroot(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	chrooted := strings.Join(cluster.Addrs(), ",") + "/chroot-cli"
	start(t, "exec", "--servers", chrooted, path, "--", "sleep", "30")
	c := connect(t)
	waitQueue(t, c, "/chroot-cli"+path, 1)
	code, out, errOut := runZK(t, 20*time.Second, "status", "--servers", chrooted, "--json", path)
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, `"node":"`+path+"/")
	code, _, errOut = runZK(t, 20*time.Second, "status", "--servers", "127.0.0.1:2181/bad/", path)
	require.Equal(t, exitUsage, code, errOut)
}

// A client certificate is an identity (ZooKeeper's x509 scheme): with mutual
// TLS and no other credentials, the holder's nodes are protected by its
// certificate's subject; a stranger with another certificate from the same
// CA sees the queue but can neither queue nor break the holder.
func TestCLIClientCertificateIsAnIdentity(t *testing.T) {
	t.Parallel()
	zc := zktest.Start(t, zktest.WithTLS("need"))
	files := zc.TLSFiles()
	servers := strings.Join(zc.Addrs(), ",")
	path := lockPath(t)
	holder := start(t, "exec", "--servers", servers, "--tls-ca", files.CA, "--tls-cert", files.ClientCert, "--tls-key", files.ClientKey, path, "--", "sleep", "30")

	cfg, strangerFiles, err := zc.NewClientCert("stranger")
	require.NoError(t, err)
	c := tlsClient(t, zc, cfg)
	waitQueue(t, c, path, 1)
	cs := contendersOf(t, c, path)
	require.Len(t, cs, 1)
	acl, _, err := c.Conn().GetACL(cs[0].Node)
	require.NoError(t, err)
	require.Equal(t, []zk.ACL{
		{Perms: zk.PermAll, Scheme: "x509", ID: "CN=" + files.ClientName},
		{Perms: zk.PermRead, Scheme: "world", ID: "anyone"},
	}, acl)

	stranger := []string{"--servers", servers, "--tls-ca", files.CA, "--tls-cert", strangerFiles.ClientCert, "--tls-key", strangerFiles.ClientKey}
	code, out, errOut := runZK(t, 20*time.Second, append(append([]string{"status"}, stranger...), path)...)
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "HOLDER")
	code, _, errOut = runZK(t, 20*time.Second, append(append([]string{"exec", "--try"}, stranger...), path, "--", "true")...)
	require.NotEqual(t, exitOK, code)
	require.Contains(t, errOut, "refused")
	require.Contains(t, errOut, path)
	require.Contains(t, errOut, "its ACL admits the client certificate CN="+files.ClientName+": give it with --tls-cert and --tls-key")
	code, _, errOut = runZK(t, 20*time.Second, append(append([]string{"break", "--yes"}, stranger...), path)...)
	require.Equal(t, exitFailure, code, errOut)
	require.Contains(t, errOut, "refused")
	require.Contains(t, errOut, "its ACL admits the client certificate CN="+files.ClientName+": give it with --tls-cert and --tls-key")
	require.NotContains(t, errOut, "auth-file", "no password protects this lock")
	require.ErrorIs(t, c.Conn().Delete(cs[0].Node, -1), zk.ErrNoAuth)
	select {
	case <-holder.done:
		t.Fatal("the holder was disturbed")
	default:
	}
}

// A server that does not ask for client certificates (ssl.clientAuth=none)
// knows no identity for the session: the protected ACL the certificate
// implies is refused, and the CLI says why and what to do.
func TestCLIClientCertificateTheServerDoesNotAskFor(t *testing.T) {
	t.Parallel()
	zc := zktest.Start(t, zktest.WithTLS("none"))
	files := zc.TLSFiles()
	code, _, errOut := runZK(t, 20*time.Second, "exec", "--servers", strings.Join(zc.Addrs(), ","), "--tls-ca", files.CA,
		"--tls-cert", files.ClientCert, "--tls-key", files.ClientKey, lockPath(t), "--", "true")
	require.Equal(t, exitSoftware, code, errOut)
	require.Contains(t, errOut, "refused the protected ACL")
	require.Contains(t, errOut, "--acl open")
}
