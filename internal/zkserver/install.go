package zkserver

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
		// Debian's manifest leaves out netty-codec, which Netty's TLS handler
		// needs (serverCnxnFactory=NettyServerCnxnFactory, TLS mode).
		if b := "/usr/share/java/netty-codec.jar"; isFile(b) {
			cp = append(cp, b)
		}
		return &install{java: java, classpath: cp, from: debianJar}, nil
	}
	return nil, fmt.Errorf("%w (%s unset, ZOOKEEPER_HOME unset, no %s)", ErrNoZooKeeper, EnvServers, debianJar)
}

// ErrNoZooKeeper: neither ZOOKEEPER_HOME nor the Debian package gives a
// ZooKeeper; ErrNoJava: there is no java to run it.
var (
	ErrNoZooKeeper = errors.New("no ZooKeeper found")
	ErrNoJava      = errors.New("no java found (JAVA_HOME unset or invalid, none on PATH); ZooKeeper needs a JRE")
)

// CheckInstall says why there is no local ZooKeeper install to start, or
// returns nil; it does not look for Docker (Start does, for tests).
func CheckInstall() error {
	_, err := findInstall()
	return err
}

func findJava() (string, error) {
	if jh := os.Getenv("JAVA_HOME"); jh != "" {
		if p := filepath.Join(jh, "bin", "java"); isFile(p) {
			return p, nil
		}
	}
	p, err := exec.LookPath("java")
	if err != nil {
		return "", ErrNoJava
	}
	return p, nil
}

func isFile(p string) bool { st, err := os.Stat(p); return err == nil && st.Mode().IsRegular() }
func isDir(p string) bool  { st, err := os.Stat(p); return err == nil && st.IsDir() }
