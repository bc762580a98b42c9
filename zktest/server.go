package zktest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// debianJar is where Debian's zookeeper package puts the server (its manifest
// carries the Class-Path of the dependencies).
const debianJar = "/usr/share/java/zookeeper.jar"

// install is a Java binary plus the classpath that runs a ZooKeeper server.
type install struct {
	java      string
	classpath []string
	from      string
}

func (i *install) String() string { return i.from }

// findInstall locates java and a ZooKeeper classpath: ZOOKEEPER_HOME first
// (the Apache tarball layout), then the Debian package.
func findInstall() (*install, error) {
	java, err := findJava()
	if err != nil {
		return nil, err
	}
	if home := os.Getenv("ZOOKEEPER_HOME"); home != "" {
		var cp []string
		for _, pat := range []string{filepath.Join(home, "*.jar"), filepath.Join(home, "lib", "*.jar")} {
			m, _ := filepath.Glob(pat)
			cp = append(cp, m...)
		}
		if len(cp) == 0 {
			return nil, fmt.Errorf("ZOOKEEPER_HOME=%s contains no *.jar or lib/*.jar", home)
		}
		// conf/ holds logback.xml (3.8) or log4j.properties (older): it
		// makes the server log to the console, which we capture.
		if isDir(filepath.Join(home, "conf")) {
			cp = append(cp, filepath.Join(home, "conf"))
		}
		return &install{java: java, classpath: cp, from: "ZOOKEEPER_HOME=" + home}, nil
	}
	if isFile(debianJar) {
		cp := []string{debianJar}
		if isDir("/etc/zookeeper/conf") {
			cp = append(cp, "/etc/zookeeper/conf")
		}
		// Debian's classpath has slf4j-api but no binding, so the server
		// would log nothing; slf4j-simple logs to stderr, which we capture.
		if b := "/usr/share/java/slf4j-simple.jar"; isFile(b) {
			cp = append(cp, b)
		}
		return &install{java: java, classpath: cp, from: debianJar}, nil
	}
	return nil, fmt.Errorf("no ZooKeeper found (%s unset, ZOOKEEPER_HOME unset, no %s)", EnvServers, debianJar)
}

func findJava() (string, error) {
	if jh := os.Getenv("JAVA_HOME"); jh != "" {
		if p := filepath.Join(jh, "bin", "java"); isFile(p) {
			return p, nil
		}
	}
	p, err := exec.LookPath("java")
	if err != nil {
		return "", fmt.Errorf("no java found (JAVA_HOME unset or invalid, none on PATH); ZooKeeper needs a JRE")
	}
	return p, nil
}

func isFile(p string) bool { st, err := os.Stat(p); return err == nil && st.Mode().IsRegular() }
func isDir(p string) bool  { st, err := os.Stat(p); return err == nil && st.IsDir() }

func newLocal(inst *install, cfg config, dirs []string) *Cluster {
	c := &Cluster{cfg: cfg, inst: inst, log: newGuardedLogf(cfg.logf)}
	for i, d := range dirs {
		c.servers = append(c.servers, &Server{
			c: c, index: i, id: i + 1, dir: d,
			tail: newLogTail(400),
		})
	}
	return c
}

// allocatePorts picks free loopback ports by binding 127.0.0.1:0, holding all
// listeners until every port is chosen so none is handed out twice.
func (c *Cluster) allocatePorts() error {
	per := 1
	if len(c.servers) > 1 {
		per = 3 // client, quorum, election
	}
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	ports := make([]int, 0, per*len(c.servers))
	for range per * len(c.servers) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("zktest: allocating a loopback port: %w", err)
		}
		lns = append(lns, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for i, s := range c.servers {
		s.clientPort = ports[i*per]
		if i == 0 && c.cfg.clientPort != 0 {
			s.clientPort = c.cfg.clientPort
		}
		if per == 3 {
			s.quorumPort, s.electionPort = ports[i*per+1], ports[i*per+2]
		}
		s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.clientPort))
	}
	return nil
}

// Server is one ZooKeeper server of a Cluster.
type Server struct {
	c        *Cluster
	index    int
	id       int // myid, index+1
	addr     string
	external bool

	dir                                  string
	clientPort, quorumPort, electionPort int
	tail                                 *logTail

	mu   sync.Mutex
	proc *process // the current or last process; nil before the first start
}

type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process is reaped and its output drained
	err    error         // Wait's result, valid after exited is closed
}

func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Addr returns the client address, "127.0.0.1:port".
func (s *Server) Addr() string { return s.addr }

// ID returns the server's myid (index+1).
func (s *Server) ID() int { return s.id }

// Dir returns the server's directory (zoo.cfg and data/); empty if external.
func (s *Server) Dir() string { return s.dir }

// Running reports whether the server process is alive. External servers are
// always reported as running.
func (s *Server) Running() bool {
	if s.external {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && s.proc.running()
}

func (s *Server) exitErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return nil
	}
	select {
	case <-s.proc.exited:
		if s.proc.err == nil {
			return errors.New("exit status 0")
		}
		return s.proc.err
	default:
		return nil
	}
}

// externalFault handles a lifecycle call on an external server: skip the test if
// we have one (fault tests cannot run against servers we don't own), else
// report ErrExternal.
func (s *Server) externalFault(op string) error {
	if s.c.tb != nil {
		s.c.tb.Helper()
		s.c.tb.Skipf("zktest: Server.%s needs a locally started ZooKeeper; %s is set", op, EnvServers)
	}
	return ErrExternal
}

// Stop stops the server gracefully (SIGTERM, then SIGKILL after 10s) and waits
// for it to exit. The data directory is kept, so Restart resumes with the same
// data. Stopping a stopped server is a no-op.
//
// On an external server (ZKLOCK_TEST_SERVERS) Stop, Kill and Restart skip the
// test that called Start (call them from that test's goroutine), or return
// ErrExternal for a cluster from StartMain.
func (s *Server) Stop() error {
	if s.external {
		return s.externalFault("Stop")
	}
	return s.stop(false)
}

// Kill kills the server with SIGKILL, modelling a crash, and waits for it to
// exit. The data directory is kept.
func (s *Server) Kill() error {
	if s.external {
		return s.externalFault("Kill")
	}
	return s.kill()
}

func (s *Server) kill() error { return s.stop(true) }

func (s *Server) stop(hard bool) error {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil || !p.running() {
		return nil
	}
	if !hard {
		_ = terminate(p.cmd.Process)
		select {
		case <-p.exited:
			return nil
		case <-time.After(10 * time.Second):
			s.c.log.logf("zk%d: did not stop within 10s of SIGTERM; killing", s.id)
		}
	}
	if err := killProcess(p.cmd.Process); err != nil && p.running() {
		return fmt.Errorf("zktest: killing server %d: %w", s.id, err)
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("zktest: server %d (pid %d) did not exit after SIGKILL", s.id, p.cmd.Process.Pid)
	}
}

// Restart starts a stopped or killed server again on the same ports and data
// directory and waits (bounded by ctx and the start timeout) until it serves
// clients; an ensemble member serves once it has rejoined a quorum.
func (s *Server) Restart(ctx context.Context) error {
	if s.external {
		return s.externalFault("Restart")
	}
	if s.Running() {
		return fmt.Errorf("zktest: server %d is running; Stop or Kill it first", s.id)
	}
	if err := s.launch(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.c.cfg.startTimeout)
	defer cancel()
	return s.waitServing(ctx)
}

// waitServing polls srvr until the server reports a serving mode.
func (s *Server) waitServing(ctx context.Context) error {
	var last error
	for {
		if !s.Running() {
			return fmt.Errorf("zktest: server %d (%s) exited: %v%s", s.id, s.addr, s.exitErr(), s.tailString(40))
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		mode, err := ServerMode(cctx, s.addr)
		cancel()
		switch {
		case err != nil:
			last = err
		case mode == "leader" || mode == "follower" || mode == "observer" || mode == "standalone":
			return nil
		default:
			last = fmt.Errorf("mode %q", mode)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("zktest: server %d (%s) not serving: %w (last check: %v)%s", s.id, s.addr, ctx.Err(), last, s.tailString(40))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *Server) tailString(n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n--- last lines of server %d (%s, dir %s) ---\n", s.id, s.addr, s.dir)
	for _, l := range s.tail.last(n) {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }
func (s *Server) cfgPath() string { return filepath.Join(s.dir, "zoo.cfg") }

// writeConfig writes zoo.cfg (and myid for ensembles). Short ticks keep
// tests fast; the 4lw whitelist enables mntr/srvr/ruok; maxClientCnxns=0
// lifts the default limit of 60 connections per IP, which tests from one
// address can hit; forceSync=no skips fsync, which only protects against
// power loss (a SIGKILLed server keeps everything in the page cache).
func (s *Server) writeConfig() error {
	cfg := s.c.cfg
	tickMs := cfg.tick.Milliseconds()
	var b strings.Builder
	fmt.Fprintf(&b, "tickTime=%d\n", tickMs)
	b.WriteString("initLimit=10\nsyncLimit=5\n")
	fmt.Fprintf(&b, "dataDir=%s\n", s.dataDir())
	fmt.Fprintf(&b, "clientPort=%d\nclientPortAddress=127.0.0.1\n", s.clientPort)
	b.WriteString("4lw.commands.whitelist=*\nadmin.enableServer=false\n")
	fmt.Fprintf(&b, "minSessionTimeout=%d\nmaxSessionTimeout=60000\n", 2*tickMs)
	b.WriteString("maxClientCnxns=0\nforceSync=no\npreAllocSize=4096\n")
	if len(s.c.servers) > 1 {
		for _, o := range s.c.servers {
			fmt.Fprintf(&b, "server.%d=127.0.0.1:%d:%d\n", o.id, o.quorumPort, o.electionPort)
		}
	}
	if err := os.MkdirAll(s.dataDir(), 0o755); err != nil {
		return err
	}
	if len(s.c.servers) > 1 {
		if err := os.WriteFile(filepath.Join(s.dataDir(), "myid"), []byte(strconv.Itoa(s.id)+"\n"), 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(s.cfgPath(), []byte(b.String()), 0o644)
}

// launch starts the JVM. Small heap and a cheap JIT/GC keep several servers
// affordable on a small machine. The process gets its own process group (so
// cleanup can kill everything it spawned) and, on Linux, dies with the test
// binary (Pdeathsig).
func (s *Server) launch() error {
	cfg := s.c.cfg
	args := []string{
		"-Xmx256m", "-Xms32m",
		"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
		"-Djava.net.preferIPv4Stack=true",
		"-Dzookeeper.jmx.log4j.disable=true",
		"-Dzookeeper.admin.enableServer=false",
		"-Dzookeeper.log.dir=" + s.dir,
		"-Dzookeeper.root.logger=INFO,CONSOLE",
		"-Dzookeeper.console.threshold=INFO",
		"-Dorg.slf4j.simpleLogger.showDateTime=true",
		"-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
		"-Dorg.slf4j.simpleLogger.showShortLogName=true",
		// one INFO line per four-letter command: our health polling would
		// drown everything else
		"-Dorg.slf4j.simpleLogger.log.org.apache.zookeeper.server.NIOServerCnxn=warn",
	}
	if cfg.containerCheck > 0 {
		args = append(args,
			fmt.Sprintf("-Dznode.container.checkIntervalMs=%d", cfg.containerCheck.Milliseconds()),
			"-Dznode.container.maxPerMinute=1000000")
	}
	for _, kv := range cfg.sysProps {
		args = append(args, "-D"+kv[0]+"="+kv[1])
	}
	args = append(args,
		"-cp", strings.Join(s.c.inst.classpath, string(os.PathListSeparator)),
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", s.cfgPath())

	cmd := exec.Command(s.c.inst.java, args...)
	cmd.Dir = s.dir
	cmd.Stdin = nil
	setProcAttr(cmd)
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = w, w
	s.tail.add(fmt.Sprintf("zktest: %s %s", s.c.inst.java, strings.Join(args, " ")))
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return fmt.Errorf("zktest: starting server %d: %w", s.id, err)
	}
	w.Close() // the child holds the write end now

	p := &process{cmd: cmd, exited: make(chan struct{})}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		defer r.Close()
		s.pumpLog(r)
	}()
	go func() {
		p.err = cmd.Wait()
		<-drained
		close(p.exited)
	}()
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	return nil
}

// pumpLog forwards the server's output line by line. It must drain the pipe
// to the end whatever happens, or the JVM would block writing its log.
func (s *Server) pumpLog(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			if errors.Is(err, bufio.ErrBufferFull) {
				// overlong line: keep the head, skip the rest
				for errors.Is(err, bufio.ErrBufferFull) {
					_, err = br.ReadSlice('\n')
				}
			}
			l := string(bytes.TrimRight(line, "\r\n"))
			s.tail.add(l)
			s.c.log.logf("zk%d: %s", s.id, l)
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// logTail keeps the last lines of a server's output for error messages.
type logTail struct {
	mu    sync.Mutex
	lines []string
	next  int
	full  bool
}

func newLogTail(n int) *logTail { return &logTail{lines: make([]string, n)} }

func (t *logTail) add(l string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines[t.next] = l
	t.next = (t.next + 1) % len(t.lines)
	if t.next == 0 {
		t.full = true
	}
}

func (t *logTail) last(n int) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var all []string
	if t.full {
		all = append(all, t.lines[t.next:]...)
	}
	all = append(all, t.lines[:t.next]...)
	if len(all) > n {
		all = all[len(all)-n:]
	}
	return all
}
