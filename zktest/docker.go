package zktest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// The last resort, after ZKLOCK_TEST_SERVERS and a local install: ZooKeeper
// in Docker, started with testcontainers-go. That library and its
// dependencies live in the module zktest/zkcontainer and are reached through
// a child process (go run), so they never enter the build of anyone who
// imports zklock or zktest. It works from a checkout of zklock, where that
// module's source sits beside this file.

// dockerAnswers reports whether a Docker engine answers a ping.
func dockerAnswers() bool {
	network, address := "unix", "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		switch {
		case strings.HasPrefix(h, "unix://"):
			address = strings.TrimPrefix(h, "unix://")
		case strings.HasPrefix(h, "tcp://"):
			network, address = "tcp", strings.TrimPrefix(h, "tcp://")
		default:
			return false
		}
	}
	conn, err := net.DialTimeout(network, address, 2*time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(conn, "GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n"); err != nil {
		return false
	}
	reply, _ := io.ReadAll(conn)
	return strings.HasPrefix(string(reply), "HTTP/1.") && strings.Contains(string(reply), " 200 ")
}

// containerModuleDir returns the zkcontainer module's directory, or "".
func containerModuleDir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return ""
	}
	dir := filepath.Join(filepath.Dir(file), "zkcontainer")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return ""
	}
	return dir
}

// startDocker runs one ZooKeeper container and returns its address and a
// function that removes it.
func startDocker(logf func(string, ...any)) (string, func(), error) {
	if !dockerAnswers() {
		return "", nil, errors.New("no Docker engine answers")
	}
	dir := containerModuleDir()
	if dir == "" {
		return "", nil, errors.New("a Docker engine answers, but the zkcontainer module is not beside zktest (run from a checkout of zklock)")
	}
	cmd := exec.Command("go", "run", "./cmd/zkcontainer")
	cmd.Dir = dir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	cmd.Stderr = logWriter{logf}
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("go run ./cmd/zkcontainer: %w", err)
	}
	stop := func() {
		stdin.Close() // the child removes the container when its stdin closes
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), EnvServers+"="); ok {
				addrc <- v
			}
		}
		close(addrc)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	select {
	case addr, ok := <-addrc:
		if ok {
			return addr, stop, nil
		}
		stop()
		return "", nil, errors.New("zkcontainer exited without an address (see its log)")
	case <-ctx.Done():
		stop()
		return "", nil, errors.New("zkcontainer gave no address within 5 minutes")
	}
}

type logWriter struct{ logf func(string, ...any) }

func (w logWriter) Write(p []byte) (int, error) {
	if w.logf != nil {
		for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
			w.logf("zkcontainer: %s", line)
		}
	}
	return len(p), nil
}
