package zkserver

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// exitedPid returns the pid of a process that has exited and been reaped.
func exitedPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// Only a zktest-* directory whose recorded owner has exited is swept: not
// one whose owner runs, nor one without a record (it may be a moment old).
// A pid that now names another process (its start time differs) is gone.
func TestPureLeftoversSweptOnlyForDeadOwners(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	mk := func(name, owner string) string {
		d := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Join(d, "zk1", "version-2"), 0o755); err != nil {
			t.Fatal(err)
		}
		if owner != "" {
			if err := os.WriteFile(filepath.Join(d, ownerFile), []byte(owner), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	dead := mk("zktest-dead", fmt.Sprintf("%d %s\n", exitedPid(t), "1"))
	reused := mk("zktest-reused", fmt.Sprintf("%d 1\n", os.Getpid())) // our pid, another start time
	if procStart(os.Getpid()) == "" {
		reused = ""
	}
	live := mk("zktest-live", fmt.Sprintf("%d %s\n", os.Getpid(), procStart(os.Getpid())))
	unrecorded := mk("zktest-unrecorded", "")
	other := mk("other-dead", fmt.Sprintf("%d\n", exitedPid(t)))

	swept := sweepLeftovers()
	want := []string{dead}
	if reused != "" {
		want = append(want, reused)
	}
	if strings.Join(swept, ",") != strings.Join(want, ",") {
		t.Fatalf("swept %v, want %v", swept, want)
	}
	for _, d := range []string{live, unrecorded, other} {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("%s was removed: %v", d, err)
		}
	}
}

// envHangChild makes the test binary a child that starts a server, prints
// its directory and waits to be killed.
const envHangChild = "ZKSERVER_TEST_HANG_CHILD"

func TestHelperStartAndHang(t *testing.T) {
	if os.Getenv(envHangChild) == "" {
		t.Skip("run by TestStartSweepsWhatAKilledRunLeft")
	}
	c, stop, err := Start(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer stop() // never runs: the parent kills us first
	fmt.Printf("DIR %s\n", c.baseDir)
	time.Sleep(time.Minute)
}

// A test binary killed before its cleanups (SIGKILL here; a -timeout alarm
// or a panic on a goroutine skip them too) leaves its zktest-* directory;
// the next Start removes it. Before issue 58 it stayed for ever.
func TestStartSweepsWhatAKilledRunLeft(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	child := exec.Command(os.Args[0], "-test.run=^TestHelperStartAndHang$", "-test.v")
	child.Env = append(os.Environ(), envHangChild+"=1")
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	dir := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "DIR "); ok {
				dir <- d
			}
		}
		close(dir)
	}()
	var left string
	select {
	case left = <-dir:
	case <-time.After(2 * DefaultStartTimeout):
	}
	_ = child.Process.Kill()
	_ = child.Wait()
	if left == "" {
		t.Fatal("the child did not start a server")
	}
	if _, err := os.Stat(left); err != nil {
		t.Fatalf("the killed run's directory is not there to sweep: %v", err)
	}

	c, stop, err := Start(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Fatalf("%s, left by the killed run, is still there after the next Start (%v)", left, err)
	}
	if _, err := os.Stat(c.baseDir); err != nil {
		t.Fatalf("the new server's own directory: %v", err)
	}
	stop()
	if _, err := os.Stat(c.baseDir); !os.IsNotExist(err) {
		t.Fatalf("%s stayed after stop", c.baseDir)
	}
}
