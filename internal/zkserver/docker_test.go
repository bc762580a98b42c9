package zkserver

import (
	"io"
	"net"
	"path/filepath"
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
