//go:build linux

package zklock_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zklock/zklock/zktest"
)

// The swarm's "fence" dimension (issue 50): the fence module's torture
// (fence/torture_test.go, `make torture-fence` on its own) runs in a go test
// process of its own beside the swarm, for the same duration, with its
// workers on this torture's ensemble, so that the swarm's server faults
// (kills, pauses, partitions, outages) reach them as well as its own
// holder pauses. Its summary line's counts join the tallies (fence.*), and
// a stale write accepted, a history porcupine cannot linearize, or a failed
// run is a violation.

// fenceMinDuration: shorter runs (make test's one-minute torture) do not
// draw the dimension unless -torture.swarm names it; make test runs the
// fence's torture on its own.
const fenceMinDuration = 5 * time.Minute

// fenceGrace: how long the fence's run may take past the swarm's duration
// (its build, its workers' last holds, its checks).
const fenceGrace = 5 * time.Minute

type fenceRun struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error

	mu      sync.Mutex
	summary string
	tail    []string // its last lines of output, for a failure
}

func (tt *torture) startFence() {
	if !tt.cfg.sw.fence {
		return
	}
	ctx, cancel := context.WithTimeout(tt.ctx, tt.cfg.duration+fenceGrace)
	// -timeout: go test's default (10 minutes) would end a long run.
	cmd := exec.CommandContext(ctx, "go", "test", "-race", "-count=1", "-timeout", (tt.cfg.duration + fenceGrace).String(), "-run", "^TestFenceTorture$", "-v", "./fence",
		"-args", "-torture.duration="+tt.cfg.duration.String(), "-torture.seed="+strconv.FormatUint(tt.cfg.seed, 10))
	cmd.Env = append(os.Environ(), zktest.EnvServers+"="+strings.Join(tt.cluster.Addrs(), ","))
	out, err := cmd.StdoutPipe()
	if err != nil {
		tt.t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		tt.t.Fatalf("fence: %v", err)
	}
	f := &fenceRun{cmd: cmd, done: make(chan struct{})}
	go func() {
		defer cancel()
		defer close(f.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f.line(sc.Text())
		}
		f.err = cmd.Wait()
	}()
	tt.fence = f
	tt.t.Logf("torture: the fence's torture runs beside the swarm (go test ./fence, pid %d)", cmd.Process.Pid)
}

func (f *fenceRun) line(l string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if strings.HasPrefix(l, "fence torture: ") {
		f.summary = l
	}
	if f.tail = append(f.tail, l); len(f.tail) > 40 {
		f.tail = f.tail[1:]
	}
}

var fenceCount = regexp.MustCompile(`(\w+)=(\d+)`)

// stopFence waits for the fence's run and folds its verdict in.
func (tt *torture) stopFence() {
	f := tt.fence
	if f == nil {
		return
	}
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.summary == "" || f.err != nil {
		tt.lg.violate("fence: its torture failed (%v); its last lines:\n%s", f.err, strings.Join(f.tail, "\n"))
		return
	}
	tt.t.Log(f.summary)
	fmt.Println(f.summary)
	for _, m := range fenceCount.FindAllStringSubmatch(f.summary, -1) {
		if m[1] != "seed" && m[1] != "workers" {
			n, _ := strconv.Atoi(m[2])
			tt.counts.addN("fence."+m[1], n)
		}
	}
	if n := tt.counts.get("fence.stale_accepted"); n > 0 {
		tt.lg.violate("fence: %d stale writes accepted", n)
	}
	if !strings.Contains(f.summary, "linearizable=Ok") {
		tt.lg.violate("fence: the workers' history is not linearizable: %s", f.summary)
	}
}
