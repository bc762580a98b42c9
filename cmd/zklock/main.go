// Command zklock runs commands under a fair distributed lock kept in
// ZooKeeper, shows who holds a lock and who waits for it, and starts a
// throwaway ZooKeeper for trying it out. Run "zklock help" for usage.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/zklock/zklock"
)

// Exit codes shared by the subcommands (sysexits.h numbers where one fits).
// exec also passes its command's own exit status through.
const (
	exitOK          = 0
	exitFailure     = 1  // status, break, server: the operation failed
	exitUsage       = 2  // bad flags or arguments (as the flag package does)
	exitUnavailable = 69 // ZooKeeper could not be reached
	exitSoftware    = 70 // exec: zklock failed for another reason
	exitLocked      = 73 // exec --try: the lock is taken
	exitTimeout     = 75 // exec --timeout expired
	exitLost        = 76 // exec: the lock was lost while the command ran
	exitHoldLimit   = 79 // exec: the command ran for --max-hold and was stopped
	exitNotThisTime = 80 // exec --once-per: the period was run already, or is being run
	exitCannotRun   = 126
	exitNotFound    = 127
)

// envServers names the environment variable holding the default servers.
const envServers = "ZKLOCK_SERVERS"

const defaultServers = "127.0.0.1:2181"

type command struct {
	name    string
	summary string
	usage   string // help text; help appends the flags
	run     func(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int
	flags   func(fs *flag.FlagSet) // declares the flags (so help can list them)
	// parse splits args into flags (set on fs) and positional arguments;
	// parseInterleaved when nil.
	parse func(fs *flag.FlagSet, args []string) ([]string, error)
}

var commands = []*command{execCmd, lockCmd, statusCmd, jobCmd, leaderCmd, limitCmd, breakCmd, serveCmd, serverCmd}

const mainUsage = `zklock runs commands under a fair distributed lock kept in ZooKeeper.

Usage:

	zklock <command> [flags] [arguments]

Commands:

%s
Run "zklock help <command>" or "zklock <command> -h" for more about a command,
"zklock --version" for the version.

ZooKeeper servers are taken from --servers, else $ZKLOCK_SERVERS, else
127.0.0.1:2181. "zklock server" starts a throwaway one for trying zklock.

Exit status: 0 on success, 2 for a usage error, 69 when ZooKeeper cannot be
reached; each command documents the rest ("zklock help exec").
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, topUsage())
		return exitUsage
	}
	name := args[0]
	switch name {
	case reapCmd:
		return runReaper(args[1:], stderr)
	case "-version", "--version", "version":
		fmt.Fprintln(stdout, version())
		return exitOK
	case "-h", "-help", "--help":
		fmt.Fprint(stdout, topUsage())
		return exitOK
	case "help":
		if len(args) < 2 {
			fmt.Fprint(stdout, topUsage())
			return exitOK
		}
		c := lookup(args[1])
		if c == nil {
			return fail(stderr, exitUsage, "unknown help topic %q; run 'zklock help' for the list of commands", args[1])
		}
		fmt.Fprint(stdout, c.help())
		return exitOK
	}
	c := lookup(name)
	if c == nil {
		return fail(stderr, exitUsage, "unknown command %q; run 'zklock help' for the list of commands", name)
	}
	fs := c.flagSet()
	parse := c.parse
	if parse == nil {
		parse = parseInterleaved
	}
	pos, err := parse(fs, args[1:])
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, c.help())
		return exitOK
	case err != nil:
		return usageError(stderr, c.name, "%v", err)
	}
	return c.run(fs, pos, stdout, stderr)
}

// parseInterleaved parses flags anywhere among the positional arguments
// ("zklock status /locks/a --json"), up to a "--" after which everything is
// positional. It returns the positional arguments.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func topUsage() string {
	var b strings.Builder
	for _, c := range commands {
		fmt.Fprintf(&b, "\t%-8s %s\n", c.name, c.summary)
	}
	return fmt.Sprintf(mainUsage, b.String())
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// flagSet returns a fresh FlagSet with the command's flags. Errors and help
// are reported by run, not by the flag package.
func (c *command) flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("zklock "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.flags(fs)
	return fs
}

// help renders the command's usage with its flags.
func (c *command) help() string {
	fs := c.flagSet()
	var b bytes.Buffer
	b.WriteString(c.usage)
	b.WriteString("\nFlags:\n")
	fs.SetOutput(&b)
	fs.PrintDefaults()
	return b.String()
}

// fail prints "zklock: <msg>" to stderr and returns code. By convention msg
// says what went wrong, then after a semicolon what to do about it.
func fail(stderr io.Writer, code int, format string, args ...any) int {
	fmt.Fprintf(stderr, "zklock: %s\n", fmt.Sprintf(format, args...))
	return code
}

func usageError(stderr io.Writer, name string, format string, args ...any) int {
	return fail(stderr, exitUsage, "%s; run 'zklock help %s' for usage", fmt.Sprintf(format, args...), name)
}

// connFlags are the flags of every command that talks to ZooKeeper.
type connFlags struct {
	servers        string
	connectTimeout time.Duration
	sec            *securityFlags // TLS, credentials, ACL: security.go
}

func addConnFlags(fs *flag.FlagSet) {
	def := os.Getenv(envServers)
	if def == "" {
		def = defaultServers
	}
	fs.String("servers", def, "ZooKeeper servers, a comma-separated `host:port` list (the port defaults to 2181), optionally followed by a chroot (host:port,host:port/app); $"+envServers+" sets the default")
	fs.Duration("connect-timeout", 15*time.Second, "give up if no ZooKeeper session is established within this `duration`")
	addSecurityFlags(fs)
}

func connFlagsOf(fs *flag.FlagSet) *connFlags {
	return &connFlags{
		servers:        flagValue[string](fs, "servers"),
		connectTimeout: flagValue[time.Duration](fs, "connect-timeout"),
		sec:            securityFlagsOf(fs),
	}
}

// flagValue returns the value of a flag the command declared.
func flagValue[T any](fs *flag.FlagSet, name string) T {
	return fs.Lookup(name).Value.(flag.Getter).Get().(T)
}

// list is the connect string as Connect takes it: one entry per address,
// each with its port (ZooKeeper's 2181 where none is given, as zkCli,
// Curator and kazoo do), the chroot still after the last.
func (cf *connFlags) list() []string {
	hosts, chroot := cf.servers, ""
	if i := strings.IndexByte(hosts, '/'); i >= 0 {
		hosts, chroot = hosts[:i], strings.TrimSpace(hosts[i:])
	}
	var out []string
	for _, s := range strings.Split(hosts, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, withPort(s))
		}
	}
	if len(out) > 0 && chroot != "" {
		out[len(out)-1] += chroot
	}
	return out
}

// withPort adds ZooKeeper's default client port to an address without one
// ("zk1", "[::1]"); any other address is returned as it is.
func withPort(a string) string {
	_, _, err := net.SplitHostPort(a)
	var ae *net.AddrError
	if errors.As(err, &ae) && ae.Err == "missing port in address" {
		return net.JoinHostPort(strings.TrimSuffix(strings.TrimPrefix(a, "["), "]"), strconv.Itoa(defaultPort))
	}
	return a
}

// check validates the flags without any I/O; it returns a usage message or
// "". A malformed server list is a usage error at once, not a wait for a
// session that cannot come.
func (cf *connFlags) check() string {
	if strings.Trim(cf.servers, ", \t") == "" {
		return "--servers is empty"
	}
	if msg := checkServers(cf.servers); msg != "" {
		return fmt.Sprintf("--servers %q: %s (want host:port,host:port,... and optionally /chroot)", cf.servers, msg)
	}
	if cf.connectTimeout <= 0 {
		return "--connect-timeout must be positive"
	}
	return cf.sec.load()
}

// checkAddr checks one host:port address; it returns what is wrong, or "".
func checkAddr(a string) string {
	if a == "" {
		return "an empty address"
	}
	host, port, err := net.SplitHostPort(withPort(a))
	if err != nil {
		return fmt.Sprintf("address %q has no port, or is not host:port", a)
	}
	if host == "" {
		return fmt.Sprintf("address %q has no host", a)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Sprintf("address %q: port %q is not a number from 1 to 65535", a, port)
	}
	return ""
}

// connect opens a session, bounded by ctx and --connect-timeout.
func (cf *connFlags) connect(ctx context.Context, opts ...zklock.Option) (*zklock.Client, error) {
	cctx, cancel := context.WithTimeout(ctx, cf.connectTimeout)
	defer cancel()
	if msg := cf.sec.load(); msg != "" {
		return nil, fmt.Errorf("%w: %s", zklock.ErrInvalidOption, msg)
	}
	opts = append(append([]zklock.Option(nil), cf.sec.opts...), opts...)
	return zklock.Connect(cctx, cf.list(), opts...)
}

// unreachable is the message for a failed connect: the library's error
// names the last cause (refused, not ZooKeeper, no answer).
func (cf *connFlags) unreachable(err error) string {
	if msg, ok := refusedCredentials(err, cf.sec.from); ok {
		return msg
	}
	return fmt.Sprintf("cannot reach ZooKeeper at %s: %s; check --servers or $%s, and that ZooKeeper runs ('zklock server' starts one for trying)",
		strings.Join(cf.list(), ","), cause(err), envServers)
}

// version is what --version prints: the module's version ("(devel)" for a
// build from a checkout), the commit it was built from, and Go's version.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "zklock (unknown version)"
	}
	v := "zklock " + bi.Main.Version
	rev, modified := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev != "" {
		v += " commit " + rev[:min(12, len(rev))]
		if modified {
			v += " (modified)"
		}
	}
	return v + " " + bi.GoVersion
}
