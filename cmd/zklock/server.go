package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/zklock/zklock/internal/zkserver"
)

var serverCmd = &command{
	name:    "server",
	summary: "start a throwaway local ZooKeeper for trying zklock",
	usage: `Usage: zklock server [flags]

Server starts a standalone ZooKeeper on 127.0.0.1 for trying zklock, prints
its address as a first line of the form

	ZKLOCK_SERVERS=127.0.0.1:PORT

and serves until it receives SIGINT (Ctrl-C) or SIGTERM, then stops the
server and deletes its data. It is not for production: the data lives in a
temporary directory, and the server is tuned for quick tests (tickTime 100ms).

It needs a local ZooKeeper install: $ZOOKEEPER_HOME (the Apache tarball) or
the Debian/Ubuntu zookeeper package, and Java; scripts/install-zookeeper.sh
in zklock's repository installs both.

Exit status: 0 after a clean stop, 1 if ZooKeeper could not start or died,
2 for a usage error.
`,
	flags: func(fs *flag.FlagSet) {
		fs.Int("port", 0, "client `port` to listen on (default: 2181, ZooKeeper's, when it is free, else a free port; see the printed address)")
	},
	run: runServer,
}

func runServer(fs *flag.FlagSet, pos []string, stdout, stderr io.Writer) int {
	if len(pos) > 0 {
		return usageError(stderr, "server", "server takes no arguments")
	}
	port := flagValue[int](fs, "port")
	if port < 0 || port > 65535 {
		return usageError(stderr, "server", "--port %d is not a port number", port)
	}
	if msg := missingInstall(); msg != "" {
		return fail(stderr, exitFailure, "cannot start ZooKeeper: %s", msg)
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	port, note, code := choosePort(port, fs, stderr)
	if code != exitOK {
		return code
	}
	if note != "" {
		fmt.Fprintf(stderr, "zklock: %s\n", note) // stdout's first line stays the address
	}
	cfg := zkserver.DefaultConfig()
	cfg.ClientPort = port
	cluster, stop, err := zkserver.Start(cfg)
	if err != nil {
		return fail(stderr, exitFailure, "cannot start ZooKeeper: %v", err)
	}
	defer stop()
	srv := cluster.Servers()[0]
	printServing(stdout, srv.Addr())
	return serve(srv, sigs, stdout, stderr)
}

// printServing tells where the server listens: first as a line to eval, then
// for people.
func printServing(stdout io.Writer, addr string) {
	fmt.Fprintf(stdout, "%s=%s\n", envServers, addr)
	fmt.Fprintf(stdout, `ZooKeeper is serving on %s (throwaway: its data is deleted when it stops).
Try it in another shell:
	export %s=%s
	zklock exec /demo/lock -- sh -c 'echo "holding the lock, token $ZKLOCK_TOKEN"; sleep 10'
	zklock status /demo/lock
Press Ctrl-C to stop.
`, addr, envServers, addr)
}

// serve waits for a signal, then stops the server; it fails if the server
// exits by itself first.
func serve(srv *zkserver.Server, sigs <-chan os.Signal, stdout, stderr io.Writer) int {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case sig := <-sigs:
			fmt.Fprintf(stdout, "got %s: stopping ZooKeeper\n", forwarded[sig])
			if err := srv.Stop(); err != nil {
				return fail(stderr, exitFailure, "stopping ZooKeeper: %v", err)
			}
			return exitOK
		case <-tick.C:
			if !srv.Running() {
				return fail(stderr, exitFailure, "ZooKeeper on %s exited unexpectedly; start it again with 'zklock server'", srv.Addr())
			}
		}
	}
}

// defaultPort is ZooKeeper's client port, which every client tries first.
const defaultPort = 2181

// choosePort checks the port before ZooKeeper is started: a taken --port is
// reported plainly (ZooKeeper would print a Java trace, or another server
// on it would look like ours); without --port, 2181 when it is free, else a
// free one, with a note saying so.
func choosePort(port int, fs *flag.FlagSet, stderr io.Writer) (int, string, int) {
	explicit := false
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "port" })
	if explicit && port != 0 {
		if err := portFree(port); err != nil {
			return 0, "", fail(stderr, exitFailure, "port %d on 127.0.0.1 is taken (%v); stop what uses it, or pick another --port", port, err)
		}
		return port, "", exitOK
	}
	if portFree(defaultPort) == nil {
		return defaultPort, "", exitOK
	}
	return 0, fmt.Sprintf("port %d is taken on 127.0.0.1; using a free port instead (clients need %s, below)", defaultPort, envServers), exitOK
}

// portFree reports why port cannot be listened on at 127.0.0.1, or nil.
func portFree(port int) error {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return ln.Close()
}

// missingInstall says what the server command lacks, in its own terms (not
// the test harness's, which also takes $ZKLOCK_TEST_SERVERS or Docker), or
// "".
func missingInstall() string {
	err := zkserver.CheckInstall()
	const how = "'zklock server' needs Java and a local ZooKeeper: the Debian/Ubuntu zookeeper package, or $ZOOKEEPER_HOME set to an unpacked Apache ZooKeeper release (scripts/install-zookeeper.sh in zklock's repository installs both)"
	switch {
	case err == nil:
		return ""
	case errors.Is(err, zkserver.ErrNoJava):
		return "no java found (JAVA_HOME unset or invalid, none on PATH); " + how
	case errors.Is(err, zkserver.ErrNoZooKeeper):
		return "no ZooKeeper found (ZOOKEEPER_HOME unset, no Debian package); " + how
	}
	return err.Error() + "; " + how
}
