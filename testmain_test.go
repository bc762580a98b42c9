package zklock_test

import (
	"flag"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/zklock/zklock/zktest"
)

// cluster is the ZooKeeper every test in this package shares; tests use
// distinct lock paths so they do not see each other. It is nil when the
// selected tests need no server (see needsServer).
var cluster *zktest.Cluster

// startTortureApart starts TestTorture's own process, where the platform
// has one (torture_apart_test.go).
var startTortureApart = func() error { return nil }

func TestMain(m *testing.M) {
	flag.Parse()
	if err := startTortureApart(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	stop := func() {}
	if needsServer(m) {
		c, stopZK, err := zktest.StartMain()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		cluster, servers, stop = c, c.Addrs(), stopZK
	}
	code := m.Run()
	stop()
	if code == 0 {
		// The torture's process watches its parent's end until it exits.
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/zklock/zklock_test.leaveWithTheParent.func1")); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// needsServer reports whether the run could select a test that needs
// ZooKeeper. Tests named TestPure... and fuzz targets (Fuzz...) must not touch
// it: they test the pure logic (frame parser, names, paths, owner records) and
// run in milliseconds, and starting a JVM for them would cost seconds. So the
// server is started only when the run could select anything else:
//
//   - no -run pattern, a -run pattern with a "/" (subtest patterns are not
//     worth decoding here), any -bench pattern, or a pattern that does not
//     compile: start;
//   - otherwise start if the pattern matches the name of any test, example or
//     fuzz target that is not pure.
//
// So `go test -run 'TestPure|Fuzz' .`, `go test -run '^$' -fuzz FuzzX .` and
// `make torture` start no shared server, and `go test ./...` starts ZooKeeper as always. Erring
// towards starting is safe; the opposite leaves cluster nil.
func needsServer(m *testing.M) bool {
	if flagValue("test.list") != "" {
		return false // only lists names
	}
	run := flagValue("test.run")
	if run == "" || strings.Contains(run, "/") || flagValue("test.bench") != "" {
		return true
	}
	re, err := regexp.Compile(run)
	if err != nil {
		return true
	}
	names, ok := testNames(m)
	if !ok {
		return true
	}
	for _, n := range names {
		if re.MatchString(n) && !ownsItsServer(n) {
			return true
		}
	}
	return false
}

// ownsItsServer reports a test that needs no shared server: pure tests and
// fuzz targets need none, the torture starts its own ensemble (and its child
// process connects through the parent's proxy).
func ownsItsServer(name string) bool {
	return strings.HasPrefix(name, "TestPure") || strings.HasPrefix(name, "Fuzz") || strings.HasPrefix(name, "TestTorture")
}

func flagValue(name string) string {
	if f := flag.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

// testNames reads the names of the tests, examples and fuzz targets compiled
// into this binary. testing.M does not export them, so they are read by
// reflection; if a Go release renames the fields, ok is false and the caller
// starts the server as before.
func testNames(m *testing.M) (names []string, ok bool) {
	v := reflect.ValueOf(m).Elem()
	for _, field := range []string{"tests", "examples", "fuzzTargets"} {
		list := v.FieldByName(field)
		if list.Kind() != reflect.Slice {
			return nil, false
		}
		for i := range list.Len() {
			name := list.Index(i).FieldByName("Name")
			if name.Kind() != reflect.String {
				return nil, false
			}
			names = append(names, name.String())
		}
	}
	return names, true
}
