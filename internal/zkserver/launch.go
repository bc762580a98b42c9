package zkserver

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }
func (s *Server) cfgPath() string { return filepath.Join(s.dir, "zoo.cfg") }

// writeConfig writes zoo.cfg (and myid for ensembles). Short ticks keep
// tests fast; the 4lw whitelist enables mntr/srvr/ruok; maxClientCnxns=0
// lifts the default limit of 60 connections per IP, which tests from one
// address can hit; forceSync=no skips fsync, which only protects against
// power loss (a SIGKILLed server keeps everything in the page cache), unless
// Config.ForceSync asks for production's default (benchmarks).
func (s *Server) writeConfig() error {
	cfg := s.c.cfg
	tickMs := cfg.Tick.Milliseconds()
	var b strings.Builder
	fmt.Fprintf(&b, "tickTime=%d\n", tickMs)
	fmt.Fprintf(&b, "initLimit=%d\nsyncLimit=%d\n", max(10, cfg.syncLimit()), cfg.syncLimit())
	fmt.Fprintf(&b, "dataDir=%s\n", s.dataDir())
	switch {
	case cfg.Reconfig:
		b.WriteString(reconfigLines) // the client port is in the server lines
	case s.c.tls != nil:
		b.WriteString(s.c.tlsLines(s.clientPort))
	default:
		fmt.Fprintf(&b, "clientPort=%d\nclientPortAddress=127.0.0.1\n", s.clientPort)
	}
	b.WriteString("4lw.commands.whitelist=*\nadmin.enableServer=false\n")
	fmt.Fprintf(&b, "minSessionTimeout=%d\nmaxSessionTimeout=%d\n", 2*tickMs, cfg.maxSessionMs())
	b.WriteString("maxClientCnxns=0\npreAllocSize=4096\n")
	if !cfg.ForceSync {
		b.WriteString("forceSync=no\n")
	}
	switch {
	case cfg.Reconfig:
		for _, o := range s.c.members() {
			b.WriteString(o.memberLine() + "\n")
		}
	case len(s.c.servers) > 1:
		if s.observer {
			b.WriteString("peerType=observer\n")
		}
		for _, o := range s.c.servers {
			line, err := s.serverLine(o)
			if err != nil {
				return err
			}
			b.WriteString(line)
		}
	}
	if err := os.MkdirAll(s.dataDir(), 0o755); err != nil {
		return err
	}
	if len(s.c.servers) > 1 || cfg.Reconfig {
		if err := os.WriteFile(filepath.Join(s.dataDir(), "myid"), []byte(strconv.Itoa(s.id)+"\n"), 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(s.cfgPath(), []byte(b.String()), 0o644)
}

// jvmArgs is the server's java command line. Small heap and a cheap JIT/GC
// keep several servers affordable on a small machine.
func (s *Server) jvmArgs() []string {
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
	if cfg.ContainerCheck > 0 {
		args = append(args,
			fmt.Sprintf("-Dznode.container.checkIntervalMs=%d", cfg.ContainerCheck.Milliseconds()),
			"-Dznode.container.maxPerMinute=1000000")
	}
	for _, kv := range cfg.SysProps {
		args = append(args, "-D"+kv[0]+"="+kv[1])
	}
	return append(args,
		"-cp", strings.Join(s.c.inst.classpath, string(os.PathListSeparator)),
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", s.cfgPath())
}

// launch starts the JVM. The process gets its own process group (so cleanup
// can kill everything it spawned) and, on Linux, dies with the program that
// started it (Pdeathsig). Its output goes to the log and the tail.
func (s *Server) launch() error {
	args := s.jvmArgs()
	cmd := exec.Command(s.c.inst.java, args...)
	cmd.Dir = s.dir
	cmd.Stdin = nil
	if shift := s.clockShift(); shift != 0 {
		cmd.Env = append(os.Environ(), faketimeEnv(s.c.faketime, shift)...)
		s.tail.add(fmt.Sprintf("zktest: server %d's wall clock shifted by %v (libfaketime)", s.id, shift))
	}
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
			s.c.log.Logf("zk%d: %s", s.id, l)
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// maxSessionMs is maxSessionTimeout in ms: the configured one or the
// default, and never below minSessionTimeout (ZooKeeper refuses to start).
func (cfg Config) maxSessionMs() int64 {
	d := cfg.MaxSessionTimeout
	if d <= 0 {
		d = DefaultMaxSessionTimeout
	}
	return max(d.Milliseconds(), 2*cfg.Tick.Milliseconds())
}
