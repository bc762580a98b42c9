package zkserver

// TLS mode: certificates made at start-up with crypto/x509 (a CA, a server
// certificate for 127.0.0.1 and localhost, a client certificate), and a
// ZooKeeper that serves clients on secureClientPort only, through Netty,
// reading PEM key and trust stores (ZooKeeper 3.8: ssl.keyStore.type=PEM, so
// no keytool is needed).

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// TLSConfig asks for a TLS-only client port.
type TLSConfig struct {
	// ClientAuth is ZooKeeper's ssl.clientAuth: "need" (a client certificate
	// is required; ZooKeeper's default), "want" or "none".
	ClientAuth string
}

// TLSMaterial is what a TLS cluster was started with: PEM files and the
// pieces of a client's tls.Config.
type TLSMaterial struct {
	Dir            string // where the files are
	CAFile         string // the CA certificate (ZooKeeper's trust store)
	ServerFile     string // the server's key and certificate (its key store)
	ClientCertFile string // the client certificate, signed by the CA
	ClientKeyFile  string // its key (PKCS#8)
	ClientName     string // the client certificate's subject common name

	Roots      *x509.CertPool
	ClientCert tls.Certificate

	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
	now   time.Time
	mu    sync.Mutex
	next  int64 // the next serial number
}

// ClientConfig returns a client tls.Config that trusts the CA and presents
// the client certificate.
func (m *TLSMaterial) ClientConfig() *tls.Config {
	return &tls.Config{RootCAs: m.Roots, Certificates: []tls.Certificate{m.ClientCert}, MinVersion: tls.VersionTLS12}
}

// NewTLSMaterial makes a CA and certificates signed by it in dir: a server
// certificate valid for 127.0.0.1, ::1 and localhost, and a client
// certificate with subject CN=clientName.
func NewTLSMaterial(dir, clientName string) (*TLSMaterial, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "zktest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	m := &TLSMaterial{ca: ca, caKey: caKey, now: now, next: 2,
		Dir:            dir,
		CAFile:         filepath.Join(dir, "ca.pem"),
		ServerFile:     filepath.Join(dir, "server.pem"),
		ClientCertFile: filepath.Join(dir, "client.pem"),
		ClientKeyFile:  filepath.Join(dir, "client-key.pem"),
		ClientName:     clientName,
		Roots:          x509.NewCertPool(),
	}
	m.Roots.AddCert(ca)
	srvCert, srvKey, err := m.leaf(m.serial(), "localhost", true)
	if err != nil {
		return nil, err
	}
	cliCert, cliKey, err := m.leaf(m.serial(), clientName, false)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		m.CAFile:         pemBlock("CERTIFICATE", caDER),
		m.ServerFile:     append(append([]byte(nil), srvKey...), srvCert...), // ZooKeeper's PEM key store: key and chain in one file
		m.ClientCertFile: cliCert,
		m.ClientKeyFile:  cliKey,
	}
	for name, b := range files {
		if err := os.WriteFile(name, b, 0o600); err != nil {
			return nil, err
		}
	}
	if m.ClientCert, err = tls.X509KeyPair(cliCert, cliKey); err != nil {
		return nil, err
	}
	return m, nil
}

// leaf makes a certificate signed by the CA, for a server (127.0.0.1, ::1,
// localhost) or a client with subject CN=cn, and its PKCS#8 key, in PEM.
func (m *TLSMaterial) leaf(serial int64, cn string, server bool) ([]byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    m.now.Add(-time.Hour),
		NotAfter:     m.now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		// A ZooKeeper server also dials its peers as a client.
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, m.ca, &key.PublicKey, m.caKey)
	if err != nil {
		return nil, nil, err
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pemBlock("CERTIFICATE", der), pemBlock("PRIVATE KEY", pkcs8), nil
}

// serial returns the next certificate serial number.
func (m *TLSMaterial) serial() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.next++
	return m.next - 1
}

// IssueClient makes another client certificate signed by the CA, with
// subject CN=name (another identity on ZooKeeper's x509 scheme), writes it
// and its key beside the others, and returns their files and the pair.
func (m *TLSMaterial) IssueClient(name string) (certFile, keyFile string, cert tls.Certificate, err error) {
	n := m.serial()
	certPEM, keyPEM, err := m.leaf(n, name, false)
	if err != nil {
		return "", "", tls.Certificate{}, err
	}
	certFile = filepath.Join(m.Dir, fmt.Sprintf("client-%d.pem", n))
	keyFile = filepath.Join(m.Dir, fmt.Sprintf("client-%d-key.pem", n))
	for name, b := range map[string][]byte{certFile: certPEM, keyFile: keyPEM} {
		if err := os.WriteFile(name, b, 0o600); err != nil {
			return "", "", tls.Certificate{}, err
		}
	}
	cert, err = tls.X509KeyPair(certPEM, keyPEM)
	return certFile, keyFile, cert, err
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// tlsLines are zoo.cfg's lines for a TLS-only client port. Keys ZooKeeper
// does not know in zoo.cfg become system properties "zookeeper.<key>", which
// is where the server reads serverCnxnFactory and ssl.* from.
func (c *Cluster) tlsLines(port int) string {
	auth := c.cfg.TLS.ClientAuth
	if auth == "" {
		auth = "need"
	}
	return fmt.Sprintf("secureClientPort=%d\nsecureClientPortAddress=127.0.0.1\n"+
		"serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n"+
		"ssl.keyStore.location=%s\nssl.keyStore.type=PEM\n"+
		"ssl.trustStore.location=%s\nssl.trustStore.type=PEM\n"+
		"ssl.clientAuth=%s\n", port, c.tls.ServerFile, c.tls.CAFile, auth)
}

// TLS returns the material of a TLS cluster, nil for a plain one.
func (c *Cluster) TLS() *TLSMaterial { return c.tls }

// serverMode is ServerMode over the cluster's transport.
func (c *Cluster) serverMode(ctx context.Context, addr string) (string, error) {
	if c.tls != nil {
		return serverModeWith(ctx, addr, c.tls.ClientConfig())
	}
	return ServerMode(ctx, addr)
}
