package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestExecOncePerOnThreeHosts: the same crontab line started on three hosts
// at once runs the command once; the others exit 80 at once naming the
// cause, and a later start in the same period names the run.
func TestExecOncePerOnThreeHosts(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	file := filepath.Join(t.TempDir(), "runs")
	line := []string{"exec", "--once-per", "1h", path, "--", "sh", "-c", `echo ran >> $0; sleep 0.3`, file}
	procs := []*proc{start(t, line...), start(t, line...), start(t, line...)}
	codes := map[int]int{}
	for _, p := range procs {
		code := p.wait(t, 20*time.Second)
		codes[code]++
		if code == exitNotThisTime {
			require.Contains(t, p.errText(), "zklock: not run: ")
		} else {
			require.Equal(t, 0, code, p.errText())
		}
	}
	require.Equal(t, map[int]int{0: 1, exitNotThisTime: 2}, codes)
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, "ran\n", string(b), "the command ran once")

	code, _, stderr := runZK(t, 20*time.Second, line...)
	require.Equal(t, exitNotThisTime, code, stderr)
	require.Contains(t, stderr, "was run this period (1h0m0s) by ")
	require.Contains(t, stderr, "succeeded at ")
	host, _ := os.Hostname()
	require.True(t, strings.Contains(stderr, "by "+host+" pid "), stderr)

	code, stdout, stderr := runZK(t, 20*time.Second, "status", path)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "last run (once per 1h0m0s): by "+host+" pid ")
}

// TestExecOncePerRecordsAFailure: a failing command is recorded as failed,
// and not run again in its period.
func TestExecOncePerRecordsAFailure(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	code, _, stderr := runZK(t, 20*time.Second, "exec", "--once-per", "1h", path, "--", "sh", "-c", "exit 3")
	require.Equal(t, 3, code, stderr)
	code, _, stderr = runZK(t, 20*time.Second, "exec", "--once-per", "1h", path, "--", "true")
	require.Equal(t, exitNotThisTime, code, stderr)
	require.Contains(t, stderr, "failed at ")
	require.Contains(t, stderr, ": exit status 3")

	killed := lockPath(t)
	code, _, stderr = runZK(t, 20*time.Second, "exec", "--once-per", "1h", killed, "--", "sh", "-c", "kill -9 $$")
	require.Equal(t, 128+9, code, stderr)
	st := jobState(t, killed)
	require.Equal(t, "killed by signal 9 (SIGKILL)", st.Last.Error)
	fixed := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)
	require.Regexp(t, fixed, st.Last.Start, "fixed-width RFC 3339 with milliseconds")
	require.NotNil(t, st.Last.End)
	require.Regexp(t, fixed, *st.Last.End)
}

// jobState is 'zklock job --json <path>', decoded.
func jobState(t *testing.T, path string) jobJSON {
	t.Helper()
	code, stdout, stderr := runZK(t, 20*time.Second, "job", "--json", path)
	require.Equal(t, 0, code, stderr)
	var st jobJSON
	require.NoError(t, json.Unmarshal([]byte(stdout), &st), stdout)
	return st
}

// TestExecOncePerQuietLosers: three hosts start the same crontab line with
// --quiet --not-run-exit 0: every one exits 0, the command ran once, and
// the two that did not run it print nothing at all.
func TestExecOncePerQuietLosers(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	file := filepath.Join(t.TempDir(), "runs")
	line := []string{"exec", "--once-per", "1h", "--quiet", "--not-run-exit", "0", path, "--", "sh", "-c", `echo ran >> $0; sleep 0.3`, file}
	procs := []*proc{start(t, line...), start(t, line...), start(t, line...)}
	for _, p := range procs {
		require.Equal(t, 0, p.wait(t, 20*time.Second), p.errText())
		require.Empty(t, p.outText())
		require.Empty(t, p.errText())
	}
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, "ran\n", string(b), "the command ran once")

	code, stdout, stderr := runZK(t, 20*time.Second, "exec", "--once-per", "1h", "--quiet", "--not-run-exit", "3", path, "--", "true")
	require.Equal(t, 3, code, "the chosen code")
	require.Empty(t, stdout)
	require.Empty(t, stderr)

	code, _, stderr = runZK(t, 20*time.Second, "exec", "--quiet", path, "--", "true")
	require.Equal(t, exitUsage, code, "--quiet needs --once-per")
	require.Contains(t, stderr, "--quiet: use with --once-per")

	// --once-per 0 is no period: a usage error, never "every host runs it".
	for _, zero := range []string{"0", "0s", "-1h", "500us"} {
		code, _, stderr = runZK(t, 20*time.Second, "exec", "--once-per", zero, "--quiet", "--not-run-exit", "0", path, "--", "true")
		require.Equal(t, exitUsage, code, "--once-per %s: %s", zero, stderr)
		require.Contains(t, stderr, "at least 1ms", "--once-per %s", zero)
		require.NotContains(t, stderr, "use with --once-per", "--once-per %s was given", zero)
	}
}

// TestExecOncePerRetryAndReset: a failed run is not run again in its
// period, --retry-failed runs it, a success ends the period even for
// --retry-failed; 'zklock job --reset' is refused while a run holds the
// lock (73), then clears the record (who and when recorded), and the next
// start runs the job.
func TestExecOncePerRetryAndReset(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	job := func(args ...string) (int, string) {
		code, _, stderr := runZK(t, 20*time.Second, append([]string{"exec", "--once-per", "1h"}, args...)...)
		return code, stderr
	}
	code, stderr := job(path, "--", "sh", "-c", "exit 3")
	require.Equal(t, 3, code, stderr)
	code, stderr = job(path, "--", "true")
	require.Equal(t, exitNotThisTime, code, stderr)
	require.Contains(t, stderr, "failed at ")
	require.Contains(t, stderr, "(error): exit status 3")
	st := jobState(t, path)
	require.Equal(t, "failed", st.Last.Outcome)
	require.Equal(t, "error", st.Last.Cause)
	require.Nil(t, st.LastSuccess)

	code, stderr = job("--retry-failed", path, "--", "true")
	require.Equal(t, 0, code, stderr)
	code, stderr = job("--retry-failed", path, "--", "true")
	require.Equal(t, exitNotThisTime, code, "a success ends the period: %s", stderr)
	st = jobState(t, path)
	require.Equal(t, "succeeded", st.Last.Outcome)
	require.NotNil(t, st.LastSuccess)
	require.Equal(t, st.Last.EndMs, st.LastSuccess.EndMs)

	// A reset of a path with no record (a typo) is refused, and writes nothing.
	typo := lockPath(t)
	code, _, stderr = runZK(t, 20*time.Second, "job", "--reset", typo)
	require.Equal(t, exitNoRecord, code, stderr)
	require.Contains(t, stderr, "not reset: "+typo+" has no run recorded")
	code, stdout, stderr := runZK(t, 20*time.Second, "job", typo)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, typo+": no run recorded\n", stdout)

	// Reset; the next start runs; a reset while it holds the lock is refused.
	code, stdout, stderr = runZK(t, 20*time.Second, "job", "--reset", path)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "reset "+path+" (its last run: by ")
	st = jobState(t, path)
	require.Equal(t, "reset", st.Last.Outcome)
	require.True(t, strings.HasPrefix(st.Last.Owner, "reset by "), st.Last.Owner)
	c := connect(t)
	file := filepath.Join(t.TempDir(), "events")
	p := start(t, "exec", "--once-per", "1h", path, "--", "sh", "-c", `echo started >> $0; sleep 30`, file)
	waitQueue(t, c, path, 1)
	waitFile(t, file, "started")
	code, _, stderr = runZK(t, 20*time.Second, "job", "--reset", path)
	require.Equal(t, exitLocked, code, stderr)
	require.Contains(t, stderr, "not reset: the lock "+path+" is held")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 128+int(syscall.SIGTERM), p.wait(t, 20*time.Second), p.errText())
	st = jobState(t, path)
	require.Equal(t, "failed", st.Last.Outcome)
	require.Equal(t, "signal", st.Last.Cause, "stopped by a signal passed on")
	require.Contains(t, st.Last.Error, "SIGTERM")

	code, stdout, stderr = runZK(t, 20*time.Second, "job", "--reset", "--owner", "ops on call", path)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "reset "+path)
	st = jobState(t, path)
	require.Equal(t, "reset", st.Last.Outcome)
	require.Equal(t, "ops on call", st.Last.Owner)
	code, stdout, stderr = runZK(t, 20*time.Second, "job", path)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "last run: reset by ops on call (on ")
	require.NotContains(t, stdout, "(reset by")
	require.NotNil(t, st.Last.End)
	require.NotNil(t, st.LastSuccess, "the reset keeps the last success")

	code, stderr = job(path, "--", "true")
	require.Equal(t, 0, code, "the next start after a reset runs: %s", stderr)
	code, stdout, stderr = runZK(t, 20*time.Second, "job", path)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, path+": once per 1h0m0s\nlast run: by ")
	host, _ := os.Hostname()
	require.Contains(t, stdout, "\nlast success: by "+host+" pid ")
}

// TestExecOncePerMaxHoldIsRecorded: a run stopped by --max-hold is recorded
// as failed with the cause hold-limit (written while the run still held
// the lock), and status shows the holder's limit (table and --json).
func TestExecOncePerMaxHoldIsRecorded(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	file := filepath.Join(t.TempDir(), "events")
	// SIGTERM comes --grace before the limit (at 7 s), so the status reads
	// below find the run still holding even on a loaded machine (two race-built
	// status runs took over 3 s in a fresh-clone run).
	p := start(t, "exec", "--once-per", "1h", "--max-hold", "8s", "--grace", "1s", path, "--", "sh", "-c",
		`trap "exit 0" TERM; echo started >> $0; while :; do sleep 0.1; done`, file)
	waitQueue(t, c, path, 1)
	waitFile(t, file, "started")
	code, stdout, stderr := runZK(t, 20*time.Second, "status", path)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, strings.Split(stdout, "\n")[1], "8s", "the LIMIT column:\n%s", stdout)
	code, stdout, stderr = runZK(t, 20*time.Second, "status", "--json", path)
	require.Equal(t, 0, code, stderr)
	var cs []contenderJSON
	require.NoError(t, json.Unmarshal([]byte(stdout), &cs), stdout)
	require.Len(t, cs, 1)
	require.Equal(t, int64(8000), cs[0].MaxHoldMs)

	require.Equal(t, exitHoldLimit, p.wait(t, 20*time.Second), p.errText())
	st := jobState(t, path)
	require.Equal(t, "failed", st.Last.Outcome)
	require.Equal(t, "hold-limit", st.Last.Cause)
	require.Less(t, st.Last.EndMs-st.Last.StartMs, int64(8000), "recorded before the limit")

	code, _, stderr = runZK(t, 20*time.Second, "exec", "--once-per", "1h", path, "--", "true")
	require.Equal(t, exitNotThisTime, code, stderr)
	require.Contains(t, stderr, "(hold-limit): stopped by the hold limit")
}

// TestExecOncePerLostIsRecorded: a run whose lock node is deleted mid-run
// (zklock break) exits 76 and records its end as lost.
func TestExecOncePerLostIsRecorded(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	file := filepath.Join(t.TempDir(), "events")
	p := start(t, "exec", "--once-per", "1h", path, "--", "sh", "-c", `echo started >> $0; sleep 30`, file)
	waitQueue(t, c, path, 1)
	waitFile(t, file, "started")
	code, _, stderr := runZK(t, 20*time.Second, "break", "--yes", path)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, exitLost, p.wait(t, 20*time.Second), p.errText())
	st := jobState(t, path)
	require.Equal(t, "failed", st.Last.Outcome)
	require.Equal(t, "lost", st.Last.Cause)
}

// TestExecOncePerSemaphoreLimitNamesTheReset: a semaphore path storing
// another limit fails (70) naming 'zklock limit --reset'.
func TestExecSemaphoreLimitMismatchNamesTheReset(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	code, _, stderr := runZK(t, 20*time.Second, "exec", "--semaphore", "2", path, "--", "true")
	require.Equal(t, 0, code, stderr)
	code, _, stderr = runZK(t, 20*time.Second, "exec", "--semaphore", "3", path, "--", "true")
	require.Equal(t, exitSoftware, code, stderr)
	require.Contains(t, stderr, "'zklock limit --reset "+path+"'")
}

// TestRefusedPortFailsFast: exec, status and job against a port that
// refuses give up after about refusedGiveUp (2 s), not the 15 s
// --connect-timeout, exit 69, and say the servers refused.
func TestRefusedPortFailsFast(t *testing.T) {
	t.Parallel()
	addr := refusedAddr(t)
	for _, args := range [][]string{
		{"exec", "--servers", addr, "/a", "--", "true"},
		{"exec", "--once-per", "1h", "--servers", addr, "/a", "--", "true"},
		{"status", "--servers", addr, "/a"},
		{"job", "--servers", addr, "/a"},
	} {
		begin := time.Now()
		code, _, stderr := runZK(t, 20*time.Second, args...)
		took := time.Since(begin)
		require.Equal(t, exitUnavailable, code, "%v: %s", args, stderr)
		require.Contains(t, stderr, "refused", "%v", args)
		require.Less(t, took, refusedGiveUp+startSlack, "%v", args)
		t.Logf("%v: exit %d after %v: %s", args[:len(args)-1], code, took.Round(time.Millisecond), strings.TrimSpace(stderr))
	}
}

// TestJobMonitoringQueryFromTheDocs runs the monitoring check of
// docs/scheduled-jobs.md, and the one 'zklock help job' prints, as written,
// with sh (dash: no pipefail): no alert after a success; CRITICAL for a job
// that never succeeded, and when ZooKeeper refuses (zklock job exits 69 and
// prints nothing on stdout, on which jq 1.6's -e alone would exit 0). It
// needs jq, which make test installs.
func TestJobMonitoringQueryFromTheDocs(t *testing.T) {
	t.Parallel()
	section := monitoringSection(t)
	_, block, ok := strings.Cut(section, "```sh\n")
	require.True(t, ok, "the docs' check")
	docCheck, _, _ := strings.Cut(block, "```")
	require.Contains(t, docCheck, "/jobs/hourly-report")
	_, helpText, _ := runZK(t, 20*time.Second, "help", "job")
	_, helpCheck, ok := strings.Cut(helpText, "\n\tzklock job --json /jobs/report |")
	require.True(t, ok, "the help's check:\n%s", helpText)
	helpCheck, _, _ = strings.Cut(helpCheck, "\n\n")
	helpCheck = "zklock job --json /jobs/report |" + strings.ReplaceAll(helpCheck, "\n\t", "\n")

	// check runs a check on path with ZKLOCK_SERVERS=servers and returns
	// its output: "" or a CRITICAL line.
	check := func(script, jobPath, path, servers string) string {
		cmd := exec.Command("sh", "-c", strings.ReplaceAll(script, jobPath, path))
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"), envServers+"="+servers, "GORACE=atexit_sleep_ms=0")
		out, err := cmd.Output()
		require.NoError(t, err, "the check's own status: %s", out)
		return strings.TrimSpace(string(out))
	}
	ok1, failed := lockPath(t), lockPath(t)
	code, _, stderr := runZK(t, 20*time.Second, "exec", "--once-per", "1h", ok1, "--", "true")
	require.Equal(t, 0, code, stderr)
	code, _, stderr = runZK(t, 20*time.Second, "exec", "--once-per", "1h", failed, "--", "false")
	require.Equal(t, 1, code, stderr)
	servers, refused := strings.Join(cluster.Addrs(), ","), refusedAddr(t)
	for _, c := range []struct{ script, jobPath string }{{docCheck, "/jobs/hourly-report"}, {helpCheck, "/jobs/report"}} {
		require.Empty(t, check(c.script, c.jobPath, ok1, servers), "succeeded this period: no alert")
		require.Contains(t, check(c.script, c.jobPath, failed, servers), "CRITICAL", "never succeeded: alert")
		require.Contains(t, check(c.script, c.jobPath, ok1, refused), "CRITICAL", "ZooKeeper refused: alert (fail closed)")
	}
}

// TestExecOncePerCalendarOnThreeHosts: three hosts on a calendar day in
// Europe/Berlin run the command once; the record names the calendar, and
// the others say which period it was.
func TestExecOncePerCalendarOnThreeHosts(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	file := filepath.Join(t.TempDir(), "runs")
	line := []string{"exec", "--once-per", "day", "--at", "02:30", "--tz", "Europe/Berlin", path, "--", "sh", "-c", `echo ran >> $0; sleep 0.3`, file}
	procs := []*proc{start(t, line...), start(t, line...), start(t, line...)}
	codes := map[int]int{}
	for _, p := range procs {
		codes[p.wait(t, 20*time.Second)]++
	}
	require.Equal(t, map[int]int{0: 1, exitNotThisTime: 2}, codes)
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, "ran\n", string(b))
	code, _, stderr := runZK(t, 20*time.Second, line...)
	require.Equal(t, exitNotThisTime, code, stderr)
	require.Contains(t, stderr, "was run this period (day at 02:30 Europe/Berlin) by ")
	st := jobState(t, path)
	require.Equal(t, "day at 02:30 Europe/Berlin", st.Calendar)
	require.Equal(t, int64(86400000), st.PeriodMs)

	for _, bad := range [][]string{
		{"exec", "--once-per", "1h", "--at", "02:00", path, "--", "true"},
		{"exec", "--once-per", "day", "--tz", "Nowhere/Else", path, "--", "true"},
		{"exec", "--once-per", "fortnight", path, "--", "true"},
	} {
		code, _, stderr := runZK(t, 20*time.Second, bad...)
		require.Equal(t, exitUsage, code, "%v: %s", bad, stderr)
	}
}

// TestScheduledJobExamplesRunAsWritten checks what cron and systemd need of
// the examples in docs/scheduled-jobs.md: a crontab line names zklock by
// its full path (cron's PATH is /usr/bin:/bin) unless the crontab sets
// PATH, and a unit file has no comment after a setting (systemd reads it as
// part of the value).
func TestScheduledJobExamplesRunAsWritten(t *testing.T) {
	t.Parallel()
	cronTime := regexp.MustCompile(`^[0-9*/,-]+( [0-9*/,-]+){4}$`)
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "scheduled-jobs.md"))
	require.NoError(t, err)
	blocks := strings.Split(string(doc), "```")
	crontabs, units := 0, 0
	for i := 1; i < len(blocks); i += 2 {
		lang, body, _ := strings.Cut(blocks[i], "\n")
		lines := strings.Split(body, "\n")
		switch {
		case lang == "ini":
			units++
			for _, l := range lines {
				if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "[") {
					continue
				}
				require.NotContains(t, l, "#", "a comment after a setting is part of its value in systemd: %q", l)
			}
		case lang == "":
			pathSet := false
			for _, l := range lines {
				pathSet = pathSet || strings.HasPrefix(l, "PATH=")
				f := strings.Fields(l)
				if len(f) < 7 || !cronTime.MatchString(strings.Join(f[:5], " ")) {
					continue
				}
				crontabs++
				require.True(t, pathSet || strings.HasPrefix(f[6], "/"), "cron's PATH is /usr/bin:/bin: %q", l)
			}
		}
	}
	require.GreaterOrEqual(t, crontabs, 2, "the crontab examples")
	require.GreaterOrEqual(t, units, 1, "the systemd example")
}

// TestExecOncePerLostEndNotRecordedWarns: a run whose lock is lost, and
// whose record another start wrote since (so its end cannot be written),
// says on stderr that its end is not recorded; the record says running.
func TestExecOncePerLostEndNotRecordedWarns(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	file := filepath.Join(t.TempDir(), "events")
	p := start(t, "exec", "--once-per", "1h", "--grace", "3s", path, "--", "sh", "-c", `trap "" TERM; echo started >> $0; while :; do sleep 0.05; done`, file)
	waitQueue(t, c, path, 1)
	waitFile(t, file, "started")
	code, _, stderr := runZK(t, 20*time.Second, "break", "--yes", path)
	require.Equal(t, 0, code, stderr)
	eventually(t, "the loss reported", func() bool { return strings.Contains(p.errText(), "lost the lock") })
	code, _, stderr = runZK(t, 20*time.Second, "exec", "--once-per", "1h", path, "--", "true")
	require.Equal(t, exitNotThisTime, code, "the period's run is recorded as running: %s", stderr)
	require.Equal(t, exitLost, p.wait(t, 20*time.Second), p.errText())
	require.Contains(t, p.errText(), "zklock: warning: could not record the end of the run of "+path)
	require.Contains(t, p.errText(), "no end recorded")
	st := jobState(t, path)
	require.Equal(t, "running", st.Last.Outcome)
	require.Nil(t, st.Last.End)
}

// TestJobLastSuccessNamesItsRunner: a success by one host, then a failed
// run by another (after a reset, in the same period): the record's last
// success still names the first host's owner and pid, in 'zklock job' and
// in --json.
func TestJobLastSuccessNamesItsRunner(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	a := start(t, "exec", "--once-per", "1h", "--owner", "host-a", path, "--", "true")
	require.Equal(t, 0, a.wait(t, 20*time.Second), a.errText())
	code, _, stderr := runZK(t, 20*time.Second, "job", "--reset", path)
	require.Equal(t, 0, code, stderr)
	b := start(t, "exec", "--once-per", "1h", "--owner", "host-b", path, "--", "sh", "-c", "exit 3")
	require.Equal(t, 3, b.wait(t, 20*time.Second), b.errText())

	st := jobState(t, path)
	require.Equal(t, "failed", st.Last.Outcome)
	require.Equal(t, "host-b", st.Last.Owner)
	require.Equal(t, b.cmd.Process.Pid, st.Last.PID)
	require.NotNil(t, st.LastSuccess)
	require.Equal(t, "succeeded", st.LastSuccess.Outcome)
	require.Equal(t, "host-a", st.LastSuccess.Owner, "the success keeps its runner")
	require.Equal(t, a.cmd.Process.Pid, st.LastSuccess.PID)
	host, _ := os.Hostname()
	require.Equal(t, host, st.LastSuccess.Host)
	require.NotEmpty(t, st.LastSuccess.Client)
	require.NotEqual(t, st.Last.Client, st.LastSuccess.Client, "two processes, two clients")

	code, stdout, stderr := runZK(t, 20*time.Second, "job", path)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, fmt.Sprintf("\nlast success: by %s pid %d (host-a), started ", host, a.cmd.Process.Pid))
}

// TestJobTreeMonitoringQueryFromTheDocs runs the docs' check of every job
// under a root (status --tree --json), as written, with sh: it names the
// job that never succeeded and not the one that did, ignores a plain lock,
// and fails closed when ZooKeeper refuses. It needs jq, which make test
// installs.
func TestJobTreeMonitoringQueryFromTheDocs(t *testing.T) {
	t.Parallel()
	section := monitoringSection(t)
	_, block, ok := strings.Cut(section, "```sh\nzklock status --tree --json /jobs |")
	require.True(t, ok, "the docs' check of every job")
	script, _, _ := strings.Cut("zklock status --tree --json /jobs |"+block, "```")

	root := lockPath(t)
	script = strings.ReplaceAll(script, "/jobs", root+"/jobs")
	good, bad := root+"/jobs/good", root+"/jobs/bad"
	code, _, stderr := runZK(t, 20*time.Second, "exec", "--once-per", "1h", good, "--", "true")
	require.Equal(t, 0, code, stderr)
	code, _, stderr = runZK(t, 20*time.Second, "exec", "--once-per", "1h", bad, "--", "false")
	require.Equal(t, 1, code, stderr)
	_, err := mustMutexCLI(t, connect(t), root+"/jobs/plain").Acquire(context.Background())
	require.NoError(t, err)
	check := func(servers string) string {
		cmd := exec.Command("sh", "-c", script)
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"), envServers+"="+servers, "GORACE=atexit_sleep_ms=0")
		out, err := cmd.Output()
		require.NoError(t, err, "the check's own status: %s", out)
		return strings.TrimSpace(string(out))
	}
	require.Equal(t, "CRITICAL: "+bad+" has not succeeded in 2 periods", check(strings.Join(cluster.Addrs(), ",")))
	require.Equal(t, "CRITICAL: the jobs under "+root+"/jobs could not be read", check(refusedAddr(t)))
}

// monitoringSection returns the Monitoring section of
// docs/scheduled-jobs.md. It fails the test without jq, which the
// section's checks need.
func monitoringSection(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("jq"); err != nil {
		t.Fatal("jq is not installed: run `make test` (scripts/install-interop.sh installs it) or `apt-get install jq`")
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "scheduled-jobs.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(doc), "### Monitoring")
	require.True(t, ok, "the docs' Monitoring section")
	return section
}
