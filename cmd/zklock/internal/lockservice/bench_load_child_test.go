package lockservice_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/cmd/zklock/internal/lockservice"
)

// The service of BenchmarkServiceLoad runs in a process of its own: this
// test binary started again with loadChildEnv set. Its CPU is then its own
// (/proc/<pid>/stat), apart from its callers' and ZooKeeper's, and it can
// tell its heap and goroutines, which `zklock serve` has no way to. It
// serves the Service over net/http as `zklock serve` does; what it leaves
// out (serve's TCP keep-alive and user-timeout options, signals) is not on
// the acquisition path.

// loadChildEnv holds the ZooKeeper addresses the child serves on.
const loadChildEnv = "ZKLOCK_BENCH_LOAD_SERVERS"

// loadStats is the child's answer to GET /bench/stats, after a GC.
type loadStats struct {
	HeapAlloc  int64 `json:"heap_alloc"`
	StackInuse int64 `json:"stack_inuse"`
	Goroutines int   `json:"goroutines"`
}

// loadChildMain serves until its stdin closes (the parent ended or stopped
// it) and returns the exit code.
func loadChildMain(servers string) int {
	if err := raiseNoFile(4*loadCallers + 256); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := zklock.Connect(ctx, strings.Split(servers, ","), zklock.WithSessionTimeout(loadSession))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	svc, err := lockservice.New(c, lockservice.Config{MaxHolds: 1 << 20, MaxLeases: 1 << 20})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /bench/stats", serveLoadStats)
	mux.Handle("/", svc.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("listening on http://%s\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	_ = svc.Close(cctx)
	_ = srv.Close()
	return 0
}

func serveLoadStats(w http.ResponseWriter, _ *http.Request) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	_ = json.NewEncoder(w).Encode(loadStats{HeapAlloc: int64(ms.HeapAlloc), StackInuse: int64(ms.StackInuse), Goroutines: runtime.NumGoroutine()})
}

// raiseNoFile lifts this process's soft limit on open files to need (every
// caller holds connections, counted at both ends), up to the hard limit.
func raiseNoFile(need uint64) error {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return err
	}
	if rl.Cur >= need {
		return nil
	}
	if rl.Max < need {
		return fmt.Errorf("open files are limited to %d (ulimit -Hn), the benchmark needs %d", rl.Max, need)
	}
	rl.Cur = need
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
}

// loadChild is the running service process, seen from the benchmark.
type loadChild struct {
	pid   int
	url   string
	stats *http.Client
}

// startLoadChild starts the service process on servers; b.Cleanup stops it.
func startLoadChild(b *testing.B, servers []string) *loadChild {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), loadChildEnv+"="+strings.Join(servers, ","))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	ch := &loadChild{pid: cmd.Process.Pid, stats: &http.Client{Transport: &http.Transport{}}}
	b.Cleanup(func() {
		ch.stats.CloseIdleConnections()
		stdin.Close()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if !strings.HasPrefix(line, "listening on ") {
		b.Fatalf("the service process did not start: %q %v", line, err)
	}
	ch.url = strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
	return ch
}

// read returns the service process's heap and goroutines.
func (ch *loadChild) read(ctx context.Context) (loadStats, error) {
	var st loadStats
	req, err := http.NewRequestWithContext(ctx, "GET", ch.url+"/bench/stats", nil)
	if err != nil {
		return st, err
	}
	resp, err := ch.stats.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// settled returns the service process's figures once its goroutine count
// has held still for three reads in a row (connections that callers closed
// take a moment to end at the service), or after 20s.
func (ch *loadChild) settled(ctx context.Context) (loadStats, error) {
	var last loadStats
	same := 0
	for end := time.Now().Add(20 * time.Second); same < 3 && time.Now().Before(end); {
		st, err := ch.read(ctx)
		if err != nil {
			return st, err
		}
		if st.Goroutines == last.Goroutines {
			same++
		} else {
			same = 1
		}
		last = st
		time.Sleep(200 * time.Millisecond)
	}
	return last, nil
}
