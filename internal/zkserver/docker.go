package zkserver

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
// imports zklock or zktest. It works only from a checkout of zklock (a
// clone, or a workspace that uses one), where that module's source sits beside
// zktest's: the module zip of zklock leaves nested modules out, so a user
// who imports zktest from the module cache gets, instead, the error
// noContainerModule, which says how to run the container by hand.

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

// thisFile is this source file's path as compiled: in a checkout, or in
// the module cache.
var thisFile = func() string {
	_, file, _, _ := runtime.Caller(0)
	return file
}()

// containerModuleDir returns the zkcontainer module's directory, or "".
func containerModuleDir() string {
	if thisFile == "" {
		return ""
	}
	// this file is internal/zkserver/docker.go; the module is zktest/zkcontainer
	dir := filepath.Join(filepath.Dir(thisFile), "..", "..", "zktest", "zkcontainer")
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
		return "", nil, errNoContainerModule
	}
	cmd, stdin, stdout, err := runContainerModule(dir, logf)
	if err != nil {
		return "", nil, err
	}
	stop := func() { stopContainerModule(cmd, stdin) }
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	select {
	case addr, ok := <-containerAddr(stdout):
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

// errNoContainerModule is startDocker's error where zktest comes from the
// module cache.
var errNoContainerModule = errors.New("a Docker engine answers, but zktest starts a container by itself only from a " +
	"checkout of zklock (its starter, the module zktest/zkcontainer, is not in zklock's module download); " +
	"start one by hand: " + DockerRecipe)

// runContainerModule starts 'go run ./cmd/zkcontainer' in dir, its stderr
// going to logf. The child removes the container when its stdin closes.
func runContainerModule(dir string, logf func(string, ...any)) (*exec.Cmd, io.WriteCloser, io.Reader, error) {
	cmd := exec.Command("go", "run", "./cmd/zkcontainer")
	cmd.Dir = dir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	cmd.Stderr = logWriter{logf}
	if err := cmd.Start(); err != nil {
		return nil, nil, nil, fmt.Errorf("go run ./cmd/zkcontainer: %w", err)
	}
	return cmd, stdin, stdout, nil
}

// stopContainerModule closes the child's stdin, so that it removes the
// container, and waits for it to exit (killing it after a minute).
func stopContainerModule(cmd *exec.Cmd, stdin io.Closer) {
	stdin.Close()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-done
	}
}

// containerAddr delivers the address the child prints as
// "ZKLOCK_TEST_SERVERS=<addr>", and is closed when its output ends.
func containerAddr(stdout io.Reader) <-chan string {
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
	return addrc
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
