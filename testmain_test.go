package zklock_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/zklock/zklock/zktest"
)

// cluster is the ZooKeeper every test in this package shares; tests use
// distinct lock paths so they do not see each other.
var cluster *zktest.Cluster

func TestMain(m *testing.M) {
	c, stop, err := zktest.StartMain()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cluster = c
	servers = c.Addrs()
	code := m.Run()
	stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}
