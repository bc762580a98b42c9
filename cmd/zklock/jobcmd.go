package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/zklock/zklock"
)

var jobCmd = &command{
	name:    "job",
	summary: "show or reset the record of a job run with exec --once-per",
	usage: `Usage: zklock job [--json | --reset] [flags] <lock path>

A job run with 'zklock exec --once-per D <lock path>' keeps its record in
<lock path>.run: its last run (who ran it, when, how it ended, and why a
failed run ended) and its last success. Job prints it:

	/jobs/report: once per 1h0m0s
	last run: by web-2 pid 4242 (report), started 2026-11-25T14:05:00.120Z, failed at 2026-11-25T14:05:41.802Z (error): exit status 3
	last success: by web-1 pid 917 (report), started 2026-11-25T13:05:00.310Z, ended 2026-11-25T13:05:38.077Z

--json prints one JSON object: path, periodMs (a calendar's nominal length:
a day 86400000), calendar ("day at 02:00 Europe/Berlin", or "" for a
duration), last and lastSuccess (each null or an object with slot,
outcome, cause, error, host, pid, client, owner, start, end, startMs,
endMs; lastSuccess names who ran it, host "" for a success recorded
before zklock kept its runner; times on ZooKeeper's clock, end and endMs
null or 0 while a run has no end recorded; start and end in UTC with
milliseconds, fixed width: 2026-11-25T14:05:00.120Z). slot is the
period the run was made in: for a duration, the server's time in
milliseconds divided by the period (slot n is [n·period, (n+1)·period));
for a calendar, in its zone, a day's number from 1970-01-01, a week's from
Monday 1969-12-29, a month's year*12 + month - 1 (2026-11: 24322). A
record's slot never moves back: a retry (exec --retry-failed), or the start
after a reset, on a server whose clock gives an earlier period than the
record's runs and records the record's period; a reset's slot is the later
of the replaced run's and the clock's. Outcomes are running,
succeeded, failed and reset; causes of a failed run are error (non-zero
exit), signal (stopped by a signal zklock passed on), hold-limit (stopped
by --max-hold) and lost (the lock was lost). A monitor can alert when the
job has not succeeded in two periods; -n with input makes it fail closed
(jq -e alone exits 0 on empty input in jq 1.6, as when zklock job cannot
reach ZooKeeper and prints nothing on stdout):

	zklock job --json /jobs/report |
	  jq -en 'input | .lastSuccess != null and (now*1000 - .lastSuccess.endMs) < 2*.periodMs' >/dev/null 2>&1 ||
	  echo CRITICAL

--reset clears the record so that the next 'zklock exec --once-per' start
runs the job, even in a period that was run already (after a failure, say).
It takes the job's lock without waiting, so it never clears a run under
way, and records who reset it (--owner, default "reset by <user>") and
when, keeping the last success.

Exit status: 0 on success (also when no run is recorded, without --reset),
1 if ZooKeeper refused a request, 2 for a usage error, 66 (--reset) if the
path has no run recorded (a typo, most likely: nothing is written), 69 if
ZooKeeper could not be reached, 73 (--reset) if the job's lock is held: a
run, or a start checking the period, is under way; try again after it.
`,
	flags: func(fs *flag.FlagSet) {
		addConnFlags(fs)
		fs.Bool("json", false, "print the record as JSON")
		fs.Bool("reset", false, "clear the record: the next start runs the job, even in a period that was run")
		fs.String("owner", "", "with --reset: `name` recorded as who reset it (default: \"reset by <user>\")")
	},
	run: runJob,
}

func runJob(fs *flag.FlagSet, pos []string, stdout, stderr io.Writer) int {
	cf := connFlagsOf(fs)
	asJSON, reset, owner := flagValue[bool](fs, "json"), flagValue[bool](fs, "reset"), flagValue[string](fs, "owner")
	switch {
	case len(pos) != 1:
		return usageError(stderr, "job", "want one lock path, got %d arguments", len(pos))
	case asJSON && reset:
		return usageError(stderr, "job", "--json prints the record; --reset clears it: use one")
	case owner != "" && !reset:
		return usageError(stderr, "job", "--owner names who reset the record: use it with --reset")
	case cf.check() != "":
		return usageError(stderr, "job", "%s", cf.check())
	}
	path := pos[0]
	if msg := badPath(path); msg != "" {
		return usageError(stderr, "job", "%s", msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cf.connectTimeout+10*time.Second)
	defer cancel()
	client, err := cf.connectOrRefused(ctx)
	if err != nil {
		return fail(stderr, cf.connectExit(err), "%s", cf.unreachable(err))
	}
	defer closeClient(client)
	j, err := client.NewJob(path, time.Millisecond) // the record names its own period
	if err != nil {
		return fail(stderr, exitFailure, "%s", cause(err))
	}
	if reset {
		return resetJob(ctx, j, owner, stdout, stderr)
	}
	st, err := j.State(ctx)
	if err != nil {
		return jobFailed(stderr, "cannot read the record of", path, err)
	}
	if asJSON {
		return printJobJSON(stdout, stderr, path, st)
	}
	if st.Last.Outcome == "" {
		fmt.Fprintf(stdout, "%s: no run recorded\n", path)
		return exitOK
	}
	fmt.Fprintf(stdout, "%s: once per %s\nlast run: %s\n", path, runPeriod(st.Last), describeRun(st.Last))
	if s := st.LastSuccess; s.Outcome != "" {
		fmt.Fprintf(stdout, "last success: %sstarted %s, ended %s\n", runnerOf(s), stamp(s.Start), stamp(s.End))
	} else {
		fmt.Fprintln(stdout, "last success: none recorded")
	}
	return exitOK
}

// runnerOf names who made a run ("by web-2 pid 4242 (report), "), or ""
// for a success recorded before its runner was kept.
func runnerOf(r zklock.Run) string {
	if r.Owner.Host == "" && r.Owner.Client == "" {
		return ""
	}
	return runner(r.Owner) + ", "
}

// resetJob clears the job's record and says what it replaced.
func resetJob(ctx context.Context, j *zklock.Job, owner string, stdout, stderr io.Writer) int {
	if owner == "" {
		owner = "reset by " + userName()
	}
	// A path with no record is a typo, most likely: a reset would create a
	// record there (of no job's period) and change nothing for the job.
	last, err := j.LastRun(ctx)
	if err != nil {
		return jobFailed(stderr, "cannot read the record of", j.Path(), err)
	}
	if last.Outcome == "" {
		return fail(stderr, exitNoRecord, "not reset: %s has no run recorded (in %s.run); check the path: it is the lock path given to 'zklock exec --once-per'", j.Path(), j.Path())
	}
	replaced, _, err := j.Reset(zklock.ContextWithOwner(ctx, owner))
	switch {
	case errors.Is(err, zklock.ErrLocked):
		return fail(stderr, exitLocked, "not reset: the lock %s is held (a run, or a start checking the period, is under way); see it with 'zklock status %s', and try again after it", j.Path(), j.Path())
	case err != nil:
		return jobFailed(stderr, "cannot reset the record of", j.Path(), err)
	}
	fmt.Fprintf(stdout, "reset %s (its last run: %s); the next start runs the job\n", j.Path(), describeRun(replaced))
	return exitOK
}

// exitNoRecord is job --reset's exit code for a path with no run recorded
// (EX_NOINPUT).
const exitNoRecord = 66

// jobFailed reports a failed read or reset and returns the exit code.
func jobFailed(stderr io.Writer, what, path string, err error) int {
	if errors.Is(err, zklock.ErrUnreachable) || errors.Is(err, context.DeadlineExceeded) {
		return fail(stderr, exitUnavailable, "no answer from ZooKeeper: %s %s: %s", what, path, cause(err))
	}
	return fail(stderr, exitFailure, "%s %s: %s", what, path, cause(err))
}

// userName is who runs zklock, for the reset record.
func userName() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	for _, v := range []string{"USER", "LOGNAME"} {
		if s := os.Getenv(v); s != "" {
			return s
		}
	}
	return fmt.Sprintf("uid %d", os.Getuid())
}

// runJSON is a run as 'zklock job --json' prints it. Every field is always
// present.
type runJSON struct {
	Slot    int64   `json:"slot"`
	Outcome string  `json:"outcome"`
	Cause   string  `json:"cause"`
	Error   string  `json:"error"`
	Host    string  `json:"host"`
	PID     int     `json:"pid"`
	Client  string  `json:"client"`
	Owner   string  `json:"owner"`
	Start   string  `json:"start"` // RFC 3339, UTC, always with milliseconds (stamp)
	End     *string `json:"end"`
	StartMs int64   `json:"startMs"`
	EndMs   int64   `json:"endMs"`
}

// jobJSON is what 'zklock job --json' prints.
type jobJSON struct {
	Path        string   `json:"path"`
	PeriodMs    int64    `json:"periodMs"`
	Calendar    string   `json:"calendar"`
	Last        *runJSON `json:"last"`
	LastSuccess *runJSON `json:"lastSuccess"`
}

func printJobJSON(stdout, stderr io.Writer, path string, st zklock.JobState) int {
	b, err := json.Marshal(toJobJSON(path, st))
	if err != nil {
		return fail(stderr, exitFailure, "encoding JSON: %v", err)
	}
	fmt.Fprintf(stdout, "%s\n", b)
	return exitOK
}

// toJobJSON is a job's record as 'zklock job --json' (and a row of
// 'status --tree --json') shows it.
func toJobJSON(path string, st zklock.JobState) jobJSON {
	return jobJSON{Path: path, PeriodMs: st.Last.Period.Milliseconds(), Calendar: st.Last.Calendar, Last: toRunJSON(st.Last), LastSuccess: toRunJSON(st.LastSuccess)}
}

func toRunJSON(r zklock.Run) *runJSON {
	if r.Outcome == "" {
		return nil
	}
	j := &runJSON{Slot: r.Slot, Outcome: r.Outcome, Cause: r.Cause, Error: r.Error, Host: r.Owner.Host, PID: r.Owner.PID,
		Client: r.Owner.Client, Owner: strings.TrimSpace(r.Owner.Name), Start: stamp(r.Start), StartMs: r.Start.UnixMilli()}
	if !r.End.IsZero() {
		end := stamp(r.End)
		j.End, j.EndMs = &end, r.End.UnixMilli()
	}
	return j
}
