package main

// The connection flags that keep a lock safe on a production ensemble: TLS
// (--tls-ca, --tls-cert, --tls-key), digest credentials, read from the
// environment or a file and never from an argument (every user of the
// machine can read a process's arguments), and the ACL of the nodes the
// command creates.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/zklock/zklock"
)

// envAuth holds digest credentials, "user:password".
const envAuth = "ZKLOCK_AUTH"

type securityFlags struct {
	tlsCA, tlsCert, tlsKey string
	authFile               string
	acl                    string

	loaded bool
	msg    string          // why the flags cannot work, once loaded
	opts   []zklock.Option // what they ask of Connect, once loaded
	from   string          // where the credentials came from, "" for none
}

func addSecurityFlags(fs *flag.FlagSet) {
	fs.String("tls-ca", "", "speak TLS to ZooKeeper (its secureClientPort), trusting the CA certificates in this PEM `file`")
	fs.String("tls-cert", "", "with --tls-key: present this client certificate (PEM `file`) for mutual TLS; implies TLS")
	fs.String("tls-key", "", "the private key (PEM `file`) of --tls-cert")
	fs.String("auth-file", "", "read digest credentials, user:password, from this `file` (else from $"+envAuth+"; never give them as an argument)")
	fs.String("acl", "", "the ACL of the nodes zklock creates: `open` (anyone may do anything) or protected (all rights for this client's identities, read for everyone); protected when credentials or a client certificate are given, else open")
}

func securityFlagsOf(fs *flag.FlagSet) *securityFlags {
	return &securityFlags{
		tlsCA:    flagValue[string](fs, "tls-ca"),
		tlsCert:  flagValue[string](fs, "tls-cert"),
		tlsKey:   flagValue[string](fs, "tls-key"),
		authFile: flagValue[string](fs, "auth-file"),
		acl:      flagValue[string](fs, "acl"),
	}
}

// load reads the certificates and credentials (local files and the
// environment, no network) once; it returns a usage message or "".
func (s *securityFlags) load() string {
	if !s.loaded {
		s.loaded = true
		s.msg = s.doLoad()
	}
	return s.msg
}

func (s *securityFlags) doLoad() string {
	if (s.tlsCert == "") != (s.tlsKey == "") {
		return "--tls-cert and --tls-key go together"
	}
	if msg := s.loadTLS(); msg != "" {
		return msg
	}
	if msg := s.loadCredentials(); msg != "" {
		return msg
	}
	return s.chooseACL()
}

// loadTLS reads --tls-ca, --tls-cert and --tls-key into a WithTLS option, if
// any is given; it returns a usage message or "".
func (s *securityFlags) loadTLS() string {
	if s.tlsCA != "" || s.tlsCert != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if s.tlsCA != "" {
			b, err := os.ReadFile(s.tlsCA)
			if err != nil {
				return fmt.Sprintf("--tls-ca: %v", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(b) {
				return fmt.Sprintf("--tls-ca %s: no PEM certificate in it", s.tlsCA)
			}
		}
		if s.tlsCert != "" {
			cert, err := tls.LoadX509KeyPair(s.tlsCert, s.tlsKey)
			if err != nil {
				return fmt.Sprintf("--tls-cert %s, --tls-key %s: %v", s.tlsCert, s.tlsKey, err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		s.opts = append(s.opts, zklock.WithTLS(cfg))
	}
	return ""
}

// loadCredentials reads digest credentials from --auth-file or $ZKLOCK_AUTH
// into a WithDigestAuth option, and records in s.from where they came from;
// it returns a usage message or "".
func (s *securityFlags) loadCredentials() string {
	cred := ""
	switch {
	case s.authFile != "":
		if msg := privateFile("--auth-file", s.authFile); msg != "" {
			return msg
		}
		b, err := os.ReadFile(s.authFile)
		if err != nil {
			return fmt.Sprintf("--auth-file: %v", err)
		}
		cred, s.from = strings.TrimRight(string(b), "\r\n"), "--auth-file "+s.authFile
	case os.Getenv(envAuth) != "":
		cred, s.from = os.Getenv(envAuth), "$"+envAuth
	}
	if s.from != "" {
		user, pass, ok := strings.Cut(cred, ":")
		if !ok || user == "" || strings.ContainsAny(cred, "\n") {
			return fmt.Sprintf("%s: credentials must be one line, user:password", s.from)
		}
		s.opts = append(s.opts, zklock.WithDigestAuth(user, pass))
	}
	return ""
}

// chooseACL turns --acl (by default protected when the client has an
// identity, else open) into a WithACL option; it returns a usage message or
// "".
func (s *securityFlags) chooseACL() string {
	// A client certificate is an identity too: ZooKeeper's x509 scheme
	// names the session by the certificate's subject.
	identity := s.from != "" || s.tlsCert != ""
	acl := s.acl
	if acl == "" {
		acl = "open"
		if identity {
			acl = "protected"
		}
	}
	switch acl {
	case "open":
		s.opts = append(s.opts, zklock.WithACL(zk.WorldACL(zk.PermAll)))
	case "protected":
		if !identity {
			return "--acl protected needs an identity: credentials (--auth-file or $" + envAuth + ") or a client certificate (--tls-cert)"
		}
		// "auth" is every identity the session authenticated as.
		s.opts = append(s.opts, zklock.WithACL([]zk.ACL{
			{Perms: zk.PermAll, Scheme: "auth", ID: ""},
			{Perms: zk.PermRead, Scheme: "world", ID: "anyone"},
		}))
	default:
		return fmt.Sprintf("--acl %q: want open or protected", s.acl)
	}
	return ""
}

// checkServers checks a --servers value, a ZooKeeper connect string: host:port
// addresses, optionally followed by a chroot ("h1:2181,h2:2181/app"). It
// returns what is wrong, or "".
func checkServers(servers string) string {
	hosts := servers
	if i := strings.IndexByte(servers, '/'); i >= 0 {
		hosts = servers[:i]
		chroot := strings.TrimSpace(servers[i:])
		switch {
		case strings.Contains(chroot, ","):
			return fmt.Sprintf("chroot %q: a chroot can only follow the last address", chroot)
		case chroot != "/":
			if err := zklock.ValidatePath(chroot); err != nil {
				return "chroot: " + cause(err)
			}
		}
	}
	for _, a := range strings.Split(hosts, ",") {
		if msg := checkAddr(strings.TrimSpace(a)); msg != "" {
			return msg
		}
	}
	return ""
}

// refusedCredentials words a Connect that failed on the credentials.
func refusedCredentials(err error, from string) (string, bool) {
	if from == "" || !(errors.Is(err, zk.ErrAuthFailed) || errors.Is(err, zk.ErrNoAuth)) {
		return "", false
	}
	return fmt.Sprintf("ZooKeeper refused the credentials from %s: %s", from, cause(err)), true
}

// connectExit is the exit status of a failed connect: 1 when the server
// refused the credentials (it answered: not an outage), else 69.
func (cf *connFlags) connectExit(err error) int {
	if _, refused := refusedCredentials(err, cf.sec.from); refused {
		return exitFailure
	}
	return exitUnavailable
}

// privateFile refuses a secret that others can read or write, as ssh
// refuses such a private key: the password in it is no secret any more.
func privateFile(flag, name string) string {
	st, err := os.Stat(name)
	if err != nil {
		return fmt.Sprintf("%s: %v", flag, err)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Sprintf("%s %s: permissions %#o let others read or change the credentials; run chmod 600 %s", flag, name, perm, name)
	}
	return ""
}

// authAdvice says, from the ACL of path, which identity ZooKeeper would let
// change it and how to give that identity: a client certificate or digest
// credentials. Without the ACL it names both.
func authAdvice(c *zklock.Client, path string) string {
	acl, _, err := c.Conn().GetACL(path)
	var certs, users []string
	for _, a := range acl {
		if a.Perms&(zk.PermCreate|zk.PermDelete) == 0 {
			continue
		}
		switch a.Scheme {
		case "x509":
			certs = append(certs, a.ID)
		case "digest":
			user, _, _ := strings.Cut(a.ID, ":")
			users = append(users, user)
		}
	}
	switch {
	case err == nil && len(certs) > 0 && len(users) == 0:
		return fmt.Sprintf("its ACL admits the client certificate %s: give it with --tls-cert and --tls-key", strings.Join(certs, ", "))
	case err == nil && len(users) > 0 && len(certs) == 0:
		return fmt.Sprintf("its ACL admits the user %s: give that user's credentials with $%s or --auth-file", strings.Join(users, ", "), envAuth)
	}
	return fmt.Sprintf("give the credentials ($%s or --auth-file) or the client certificate (--tls-cert, --tls-key) of the path's owner", envAuth)
}

// cliWords renders a library message in the command's terms: the CLI's
// flags instead of the library's options.
func cliWords(msg string) string {
	return strings.NewReplacer(
		"see WithTLS", "give --tls-ca",
		"drop WithTLS", "drop --tls-ca and --tls-cert",
		"WithTLS", "--tls-ca",
	).Replace(msg)
}
