package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/cmd/zklock/internal/lockservice"
)

var serveCmd = &command{
	name:    "serve",
	summary: "serve locks and elections over HTTP/JSON to programs in any language",
	usage: `Usage: zklock serve [flags]

Serve answers an HTTP/JSON API (docs/serve.md, docs/openapi.json) over one
ZooKeeper session: acquire a mutex, a read/write lock or a semaphore (waiting
with a timeout, or trying), release it, campaign in an election, read or
watch the leader, read a lock's queue; or, for callers that cannot keep a
request open, grant a lease with a TTL (at most a third of the session
timeout ZooKeeper granted: --session-timeout, or less if the servers'
maxSessionTimeout is lower), keep it alive with plain requests, and take
and release locks with it in separate requests.

A caller holds a lock for as long as its acquire request stays open: the
answer (sent at once) is a stream of JSON lines, "heartbeat" every
--heartbeat while it waits and while it holds, "granted" with the fencing
token, then "released" or "lost" (with the reason) at the end. Closing the
request releases the lock; a caller that is killed releases it as its
connection closes, one whose host or network vanished (no FIN) within
--heartbeat plus 15s, 20s at the default (on --listen, on Linux: the next
heartbeat goes unacknowledged for 15s, TCP_USER_TIMEOUT), and one that
stopped reading (a curl whose pipe closed) at the next heartbeat that
cannot be written. A lost lock is
written to its stream before the service grants the path to another of its
callers, in the service's order (seq), not in wall-clock time across
processes: the fencing token is what a resource relies on. Scripts hold locks with 'zklock exec' or 'zklock lock', not curl.

It listens on 127.0.0.1:7070 by default, or on a Unix socket (--unix).
Anywhere but loopback it needs --token-file: callers then send
"Authorization: Bearer <token>". Paths outside --prefix are refused (the
paths the service made below it are removed once empty, 5s after their
last holder left; --prefix itself never is), and each caller (each token's
name) holds, waits for or watches at most --max-holds locks. Web pages
are kept out: a request carrying an Origin header (not in --allow-origin)
is refused, and on TCP so is one whose Host is not an IP address,
localhost or an --allow-host name (DNS rebinding).

The first line on stdout is "listening on http://ADDR" (or "unix:PATH").

A token alone on its line is named "token-" and the first 12 hex digits
of its SHA-256, wherever the line is.

SIGHUP reloads --token-file (without it, SIGHUP is not caught). It
compares tokens and their names, not lines: a token kept under the same
name ends nothing, whatever else changed in the file (lines or comments
added or removed above it, the order). A token added is accepted at once.
A token removed (or given another name) ends what was taken with it, and
nothing else: each stream holding a lock ends with "lost" (the
reason says the token was removed) before the lock is released, each
waiting stream with "failed", each watch; each lease ends at once (its next
keep-alive or release answers 410 lease_lost, saying the token was
removed) and its locks are released at its deadline, at most its TTL
later. A file that cannot be read or parsed, or whose mode is not 600,
keeps the tokens read before; stderr says why.

SIGINT or SIGTERM ends every stream with "released" (its lock released) and
every lease (its next call answers 410 lease_lost), and exits 0 once the
leases' locks are released at their deadlines: within 5s plus the longest
TTL (a third of the granted session timeout), since a lease's caller may
work until its deadline. A second SIGINT or SIGTERM exits at once, ending
the leases' locks with the session before their callers' deadlines.

Exit status:

	0      stopped by SIGINT or SIGTERM
	1      cannot listen on the address or socket
	2      usage error (a non-loopback --listen without --token-file, say)
	69     ZooKeeper could not be reached within --connect-timeout
`,
	flags: func(fs *flag.FlagSet) {
		addConnFlags(fs)
		fs.String("listen", "127.0.0.1:7070", "listen on this TCP `address`; other than loopback needs --token-file")
		fs.String("unix", "", "listen on a Unix socket at this `path` instead (created with mode 600)")
		fs.Duration("heartbeat", lockservice.DefaultHeartbeat, "write a heartbeat line on every stream this often (a `duration`), inside every client's and proxy's idle timeout")
		fs.String("allow-host", "", "comma-separated host `names` accepted in the Host header besides IP addresses and localhost (the name a proxy or callers use)")
		fs.String("allow-origin", "", "comma-separated `origins` (https://app.example) whose web pages may call the service; others are refused")
		fs.String("token-file", "", "`file` of bearer tokens callers must send, one a line: 'name token' (or just the token, named token- and 12 hex digits of its SHA-256); mode 600; SIGHUP reloads it")
		fs.String("prefix", "/", "refuse lock and election paths outside this `path`; the empty paths the service made below it are removed")
		fs.Int("max-holds", lockservice.DefaultMaxHolds, "most locks one caller (one token's name) may hold or wait for at once (`N`)")
		fs.Int("max-leases", lockservice.DefaultMaxLeases, "most leases one caller may have at once (`N`); their locks count against --max-holds")
		fs.Duration("session-timeout", zklock.DefaultSessionTimeout, "ZooKeeper session timeout (a `duration`): how long the locks outlive this process")
		fs.Bool("verbose", false, "log session events to stderr")
	},
	run: runServe,
}

func runServe(fs *flag.FlagSet, pos []string, stdout, stderr io.Writer) int {
	if len(pos) > 0 {
		return usageError(stderr, "serve", "serve takes no arguments")
	}
	conn := connFlagsOf(fs)
	cfg := lockservice.Config{Prefix: flagValue[string](fs, "prefix"), MaxHolds: flagValue[int](fs, "max-holds")}
	if msg := conn.check(); msg != "" {
		return usageError(stderr, "serve", "%s", msg)
	}
	if msg := badPath(cfg.Prefix); cfg.Prefix != "/" && msg != "" {
		return usageError(stderr, "serve", "--prefix: %s", msg)
	}
	if cfg.MaxHolds < 1 {
		return usageError(stderr, "serve", "--max-holds must be at least 1")
	}
	if cfg.MaxLeases = flagValue[int](fs, "max-leases"); cfg.MaxLeases < 1 {
		return usageError(stderr, "serve", "--max-leases must be at least 1")
	}
	if cfg.Heartbeat = flagValue[time.Duration](fs, "heartbeat"); cfg.Heartbeat < 10*time.Millisecond {
		return usageError(stderr, "serve", "--heartbeat must be at least 10ms")
	}
	cfg.AllowHosts = splitList(flagValue[string](fs, "allow-host"))
	cfg.AllowOrigins = splitList(flagValue[string](fs, "allow-origin"))
	cfg.AnyHost = flagValue[string](fs, "unix") != "" // no web page reaches a Unix socket
	if f := flagValue[string](fs, "token-file"); f != "" {
		var msg string
		if cfg.Tokens, msg = readTokens(f); msg != "" {
			return usageError(stderr, "serve", "%s", msg)
		}
	}
	ln, code := serveListen(fs, len(cfg.Tokens) > 0, stderr)
	if ln == nil {
		return code
	}
	defer ln.Close()

	opts := []zklock.Option{
		zklock.WithSessionTimeout(flagValue[time.Duration](fs, "session-timeout")),
		// Lock paths the service made below the prefix go once empty (after
		// the cleanup delay), not only the last node of each: callers name
		// paths freely, and the prefix is the boundary they share.
		zklock.WithCleanupRoot(cfg.Prefix),
	}
	if flagValue[bool](fs, "verbose") {
		l := slog.New(slog.NewTextHandler(stderr, nil))
		opts = append(opts, zklock.WithLogger(l))
		cfg.Logger = l
	}
	client, err := conn.connect(context.Background(), opts...)
	if err != nil {
		return fail(stderr, conn.connectExit(err), "%s", conn.unreachable(err))
	}
	defer closeClient(client)
	svc, err := lockservice.New(client, cfg)
	if err != nil {
		return usageError(stderr, "serve", "%v", err)
	}
	return serveUntilSignal(ln, svc, serveStop{tokenFile: flagValue[string](fs, "token-file")}, stdout, stderr)
}

// serveListen opens the listener the flags ask for; nil and the exit code
// after reporting why not.
func serveListen(fs *flag.FlagSet, tokens bool, stderr io.Writer) (net.Listener, int) {
	if path := flagValue[string](fs, "unix"); path != "" {
		old := syscall.Umask(0o177) // the socket is made rw------- (600)
		ln, err := net.Listen("unix", path)
		syscall.Umask(old)
		if err != nil {
			return nil, fail(stderr, exitFailure, "cannot listen on %s: %v; remove a stale socket, or choose another --unix path", path, err)
		}
		return ln, exitOK
	}
	addr := flagValue[string](fs, "listen")
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, usageError(stderr, "serve", "--listen %q: %v", addr, err)
	}
	if ip := net.ParseIP(host); !tokens && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, usageError(stderr, "serve", "--listen %s is not a loopback address: give --token-file so that strangers are refused", addr)
	}
	ln, err := listenTCP(addr, userTimeout)
	if err != nil {
		return nil, fail(stderr, exitFailure, "cannot listen on %s: %v; choose another --listen address", addr, err)
	}
	return ln, exitOK
}

// userTimeout is how long data sent to a caller over TCP may go
// unacknowledged before the connection is ended (TCP_USER_TIMEOUT, on
// Linux): with a heartbeat every 5 s, a caller whose host or network
// vanished is found within 20 s of its last acknowledgement.
const userTimeout = 15 * time.Second

// listenTCP listens on addr with TCP keep-alive (a connection with nothing
// unacknowledged is probed after 5 s idle, every 5 s) and, where the system
// has it, TCP_USER_TIMEOUT ut, which the accepted connections inherit:
// Linux sends no keep-alive probe while data is unacknowledged, so a caller
// whose host vanished while heartbeats were flowing is found only by it.
func listenTCP(addr string, ut time.Duration) (net.Listener, error) {
	lc := net.ListenConfig{
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: 5 * time.Second, Count: 3},
		Control: func(_, _ string, c syscall.RawConn) error {
			if ut <= 0 {
				return nil
			}
			return setUserTimeout(c, ut)
		},
	}
	return lc.Listen(context.Background(), "tcp", addr)
}

// shutdownBound is how long stopping takes at most besides the leases:
// every stream ends and its lock is released (one ZooKeeper round trip
// each).
const shutdownBound = 5 * time.Second

// serveStop is what serveUntilSignal does on signals: the token file that
// SIGHUP reloads ("" for none: SIGHUP is then not caught).
type serveStop struct {
	tokenFile string
}

// serveUntilSignal serves on ln until SIGINT or SIGTERM, reloading the
// token file on SIGHUP. On the stop signal it ends every stream (releasing
// its lock) and every lease (whose locks are released at its deadline, so
// that its caller, by its rule, has stopped by then), and stops within
// shutdownBound plus the longest lease TTL; a second SIGINT or SIGTERM
// stops at once.
func serveUntilSignal(ln net.Listener, svc *lockservice.Service, st serveStop, stdout, stderr io.Writer) int {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	hups := make(chan os.Signal, 1)
	if st.tokenFile != "" {
		signal.Notify(hups, syscall.SIGHUP)
		defer signal.Stop(hups)
	}
	srv := &http.Server{Handler: svc.Handler(), ReadHeaderTimeout: 10 * time.Second, ConnContext: peerContext}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if ln.Addr().Network() == "unix" {
		fmt.Fprintf(stdout, "listening on unix:%s\n", ln.Addr())
	} else {
		fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr())
	}
	code := exitOK
serving:
	for {
		select {
		case <-hups:
			reloadTokens(svc, st.tokenFile, stderr)
		case <-sigs:
			break serving
		case err := <-served:
			code = fail(stderr, exitFailure, "serving stopped: %v", err)
			break serving
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownBound+svc.MaxLeaseTTL())
	defer cancel()
	closed := make(chan error, 1)
	go func() { closed <- svc.Close(ctx) }()
	select {
	case <-closed:
	case <-sigs:
		fmt.Fprintf(stderr, "zklock: stopping at once: leases' locks end with the session, before their callers' deadlines\n")
		cancel()
		<-closed
	}
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		_ = srv.Close()
	}
	return code
}

// reloadTokens reads the token file again (SIGHUP) and gives the service
// its tokens; a file that cannot be read keeps the old ones. It says on
// stderr what it did.
func reloadTokens(svc *lockservice.Service, file string, stderr io.Writer) {
	tokens, msg := readTokens(file)
	if msg != "" {
		fmt.Fprintf(stderr, "zklock: SIGHUP: not reloaded, the tokens read before still hold: %s\n", msg)
		return
	}
	ch, err := svc.SetTokens(tokens)
	if err != nil {
		fmt.Fprintf(stderr, "zklock: SIGHUP: not reloaded: %v\n", err)
		return
	}
	ended := ""
	if ch.Removed > 0 {
		ended = "; what the removed ones held has ended"
	}
	fmt.Fprintf(stderr, "zklock: SIGHUP: reloaded --token-file %s: %d tokens, %d added, %d removed%s\n", file, ch.Tokens, ch.Added, ch.Removed, ended)
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// readTokens reads a token file: "name token" or "token" per line, blank
// lines and # comments skipped. It returns a usage message on failure.
//
// A token alone on its line is named by a digest of itself (bareTokenName),
// never by its place in the file: a reload ends what a caller took with a
// token only if the token is gone or named otherwise, so an edit that
// keeps it (lines or comments added or removed around it, as in a rotation)
// ends nothing. A token given twice under two names is refused.
func readTokens(name string) (map[string]string, string) {
	if msg := privateFile("--token-file", name); msg != "" {
		return nil, msg
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Sprintf("--token-file: %v", err)
	}
	defer f.Close()
	tokens := map[string]string{}
	lineOf := map[string]int{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		var tok, caller string
		switch {
		case len(fields) == 0 || strings.HasPrefix(fields[0], "#"):
			continue
		case len(fields) == 1:
			tok, caller = fields[0], bareTokenName(fields[0])
		case len(fields) == 2:
			tok, caller = fields[1], fields[0]
		default:
			return nil, fmt.Sprintf("--token-file %s line %d: want 'name token' or 'token'", name, n)
		}
		if was, ok := tokens[tok]; ok && was != caller {
			return nil, fmt.Sprintf("--token-file %s line %d: the token of line %d again, under another name", name, n, lineOf[tok])
		}
		tokens[tok], lineOf[tok] = caller, n
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Sprintf("--token-file %s: %v", name, err)
	}
	if len(tokens) == 0 {
		return nil, fmt.Sprintf("--token-file %s holds no token", name)
	}
	return tokens, ""
}

// bareTokenName names a token written alone on its line: "token-" and the
// first 12 hex digits of its SHA-256, the same wherever the line is. It is
// the caller's name (what --max-holds counts, the owner recorded by
// default, what the service logs), so it never holds the token itself; a
// token long and random enough for a bearer token cannot be found from it.
func bareTokenName(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "token-" + hex.EncodeToString(sum[:6])
}
