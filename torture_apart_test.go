//go:build linux

package zklock_test

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// The torture runs in a process of its own, this test binary run again for
// TestTorture alone, started by TestMain as the run begins: its goroutine
// and CPU checks then see the torture only, and the package's other tests,
// run in parallel meanwhile, do not wait the torture's minute. TestTorture
// in the parent reports the process's log and verdict.

// envTortureHere, set to "1", runs the torture itself in this process.
const envTortureHere = "ZKLOCK_TORTURE_HERE"

// apartTorture is the torture's process; nil when the run does not select
// TestTorture, or in that process itself.
var apartTorture *tortureProc

type tortureProc struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string      // its output not yet reported
	more  chan struct{} // a line was added (capacity 1)
	done  chan struct{}
	err   error // its exit, once done is closed
}

func init() { startTortureApart = startTortureProc }

// startTortureProc starts the torture's process if the run selects
// TestTorture; the flags of the torture and of the testing package that
// shape it (-torture.*, -test.short, -test.v) go along.
func startTortureProc() error {
	if os.Getenv(envTortureHere) == "1" || !selects("TestTorture") {
		return nil
	}
	args := []string{"-test.run=^TestTorture$", "-test.count=1", "-test.v", "-test.timeout=0"}
	flag.Visit(func(f *flag.Flag) {
		if strings.HasPrefix(f.Name, "torture.") || f.Name == "test.short" {
			args = append(args, "-"+f.Name+"="+f.Value.String())
		}
	})
	p := &tortureProc{cmd: exec.Command(os.Args[0], args...), more: make(chan struct{}, 1), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), envTortureHere+"=1")
	stdin, err := p.cmd.StdinPipe() // its end tells the process that this one is gone
	if err != nil {
		return err
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	p.cmd.Stderr = p.cmd.Stdout
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("starting the torture's process: %w", err)
	}
	go p.collect(out, stdin)
	apartTorture = p
	return nil
}

// collect keeps the process's output until it exits.
func (p *tortureProc) collect(out io.Reader, stdin io.Closer) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		p.mu.Lock()
		p.lines = append(p.lines, sc.Text())
		p.mu.Unlock()
		select {
		case p.more <- struct{}{}:
		default:
		}
	}
	p.err = p.cmd.Wait()
	stdin.Close()
	close(p.done)
}

// report passes the process's output on to t as it comes (a long
// torture's progress shows with -v), then its verdict.
func (p *tortureProc) report(t *testing.T) {
	for ended := false; !ended; {
		select {
		case <-p.more:
		case <-p.done:
			ended = true
		}
		p.mu.Lock()
		lines := p.lines
		p.lines = nil
		p.mu.Unlock()
		for _, l := range lines {
			t.Log(l)
		}
	}
	if p.err != nil {
		t.Fatalf("the torture's process failed (%v): its output is above", p.err)
	}
}

// leaveWithTheParent ends the torture's process when the test process that
// started it is gone (its stdin closes): a killed or timed-out parent leaves
// no torture running.
func leaveWithTheParent() {
	if os.Getenv(envTortureHere) != "1" {
		return
	}
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		fmt.Fprintln(os.Stderr, "torture: the test process that started this one is gone")
		os.Exit(2)
	}()
}

// selects reports whether the run's -test.run pattern selects the top-level
// test name (no pattern: every test).
func selects(name string) bool {
	run := flagValue("test.run")
	if flagValue("test.list") != "" {
		return false
	}
	if run == "" {
		return true
	}
	top, _, _ := strings.Cut(run, "/")
	re, err := regexp.Compile(top)
	return err != nil || re.MatchString(name)
}
