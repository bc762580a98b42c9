package zkserver

import (
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// The Docker fallback starts only when an engine answers its ping.
func TestDockerAnswers(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 512)
			_, _ = c.Read(buf)
			_, _ = io.WriteString(c, "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nOK")
			c.Close()
		}
	}()
	t.Setenv("DOCKER_HOST", "unix://"+sock)
	if !dockerAnswers() {
		t.Fatal("a listening engine was not recognised")
	}
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "none.sock"))
	if dockerAnswers() {
		t.Fatal("no engine, but dockerAnswers said yes")
	}
	if containerModuleDir() == "" {
		t.Fatal("the zkcontainer module should sit beside zktest in a checkout")
	}
}

// From the module cache, where the module zip holds no zktest/zkcontainer,
// zktest does not promise to start a container: a Docker engine that
// answers gets the recipe to run one by hand, and so does every "no
// ZooKeeper" failure (InstallHint). Before issue 58 the hint promised the
// automatic fallback to every user, and the error said only "run from a
// checkout of zklock".
func TestNoContainerModuleSaysWhatToDo(t *testing.T) {
	recipe := "docker run -d --rm -p 127.0.0.1:2181:2181"
	if !strings.Contains(InstallHint, recipe) || !strings.Contains(InstallHint, EnvServers+"=127.0.0.1:2181") {
		t.Fatalf("InstallHint gives no way to use Docker from the module cache:\n%s", InstallHint)
	}
	if !strings.Contains(InstallHint, "go list -m -f '{{.Dir}}' github.com/zklock/zklock") {
		t.Fatalf("InstallHint names scripts/install-zookeeper.sh without saying where a module user finds it:\n%s", InstallHint)
	}

	sock := filepath.Join(t.TempDir(), "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 512)
			_, _ = c.Read(buf)
			_, _ = io.WriteString(c, "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nOK")
			c.Close()
		}
	}()
	t.Setenv("DOCKER_HOST", "unix://"+sock)
	// as compiled from the module cache: no zktest/zkcontainer beside
	cache := filepath.Join(t.TempDir(), "pkg", "mod", "github.com", "zklock", "zklock@v0.1.0")
	saved := thisFile
	thisFile = filepath.Join(cache, "internal", "zkserver", "docker.go")
	defer func() { thisFile = saved }()
	_, _, err = startDockerInstead(DefaultConfig(), errors.New("no local install"))
	if err == nil {
		t.Fatal("started without a container module")
	}
	for _, want := range []string{recipe, EnvServers + "=127.0.0.1:2181"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("the error does not say %q:\n%v", want, err)
		}
	}
}
