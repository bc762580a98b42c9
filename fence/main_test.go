package fence_test

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/zklock/zklock/fence/internal/dbserver"
	"github.com/zklock/zklock/zktest"
)

// zookeeper is the ensemble the tests that take real locks share, started
// on first use.
var zookeeper struct {
	once sync.Once
	c    *zktest.Cluster
	stop func()
	err  error
}

func sharedZooKeeper(t testing.TB) *zktest.Cluster {
	t.Helper()
	zookeeper.once.Do(func() { zookeeper.c, zookeeper.stop, zookeeper.err = zktest.StartMain() })
	if zookeeper.err != nil {
		t.Fatal(zookeeper.err)
	}
	return zookeeper.c
}

func TestMain(m *testing.M) {
	code := m.Run()
	if zookeeper.stop != nil {
		zookeeper.stop()
	}
	if err := dbserver.StopShared(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the database servers:", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}
