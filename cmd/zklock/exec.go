package main

import (
	"flag"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/zklock/zklock"
)

var execCmd = &command{
	name:    "exec",
	summary: "run a command while holding a lock, waiting for its turn",
	usage: `Usage: zklock exec [flags] <lock path> [--] <command> [args...]

Exec waits for its turn on the lock at <lock path> (first come, first served,
across every client of the path), runs the command while holding the lock,
releases it when the command exits, and exits with the command's status.

By default the lock is exclusive. --read takes it as a reader of a
read/write lock (readers share, writers exclude them), --write as its
writer (needed to exclude Curator's readers, which do not treat a plain
mutex as a writer; add --kazoo to name the nodes as kazoo does, whose
readers recognise only kazoo's writers), --semaphore N as one of N holders
of a semaphore (with --permits k, as k of its N permits at once, all or
none). --and <lock path>, repeated, adds paths: exec takes all of
them, in sorted order so that no two clients deadlock, as one lease.

The command runs in its own process group, with these added to its
environment:

	ZKLOCK_PATH   the lock path (several: comma-separated, in the order taken)
	ZKLOCK_NODE   the lock node this holder created (several: comma-separated)
	ZKLOCK_TOKEN  the fencing token: larger for every later holder of the path
	              (several paths: the largest of their tokens)
	ZKLOCK_TOKENS each path's own token, path=token,... in the order taken
	              (one path: the same as ZKLOCK_TOKEN)

SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to zklock are passed on to the
command's process group, and the lock is released once the command has exited.
What the command leaves in its process group (background children, or the
children of a command killed by SIGKILL) gets SIGTERM, then SIGKILL after
--grace (or sooner: at --max-hold's SIGKILL, before the session could
expire, at once if the lock is lost), before the lock is released; the exit
status stays the command's.
While zklock is still waiting, SIGINT, SIGTERM, SIGHUP and SIGQUIT make it
leave the queue and exit.
When zklock runs in the foreground of a terminal, the command's process group
gets the terminal while it runs (as under flock(1), it can read it, and
Ctrl-C reaches it), and zklock takes the terminal back after it. While the
command runs, zklock is neither stopped by SIGTTOU or SIGTTIN nor killed by
SIGPIPE, and refuses SIGTSTP (Ctrl-Z), saying so: stopped, it would let the
lock expire while the command ran.

--value V campaigns in an election on the path (the same lock, shared with
Curator's LeaderSelector) and publishes V, an address say, with its owner
record while the command runs: 'zklock leader <path>' shows who leads and V.
With --http ADDR as well, zklock serves GET /leader on ADDR (200 only while
it leads, else 503 with a JSON body naming the leader) and GET /healthz, for
a load balancer or a readiness probe.

With --revocable, a request to release ('zklock break --ask', Curator's
Revoker) stops the command the same way (SIGTERM, then SIGKILL after
--grace); the lock is released once it has exited, and zklock exits with
its status.

If the lock is lost while the command runs (its ZooKeeper session expired, or
its node was deleted, e.g. by 'zklock break'), zklock sends SIGTERM to the
command's process group, then SIGKILL after --grace (or as soon as the command
itself has exited), and exits 76. A holder can lose the lock without hearing
of it in time (a paused machine), so a command that writes to a shared
resource should pass ZKLOCK_TOKEN along and have the resource reject tokens
lower than the highest it has seen. If zklock itself is killed, ZooKeeper
frees the lock when its session times out, and the command's whole process
group receives SIGTERM, then SIGKILL after --grace or at the lease's loss
deadline, whichever is first (before the session can expire); if zklock is
stopped (SIGSTOP), the group gets SIGKILL then. See docs/cli.md for what
cannot be guaranteed (a setsid child, uninterruptible sleep).

--once-per D runs the command as a job, at most once per period D of
ZooKeeper's clock, whichever host starts it first (see 'zklock job' and
docs/scheduled-jobs.md). D is a duration (slots aligned to 1970-01-01 UTC:
24h is a UTC day, 168h a week from Thursday), or day, week (from Monday) or
month, beginning at --at HH:MM in the zone --tz (default 00:00 UTC), from
the host's zone database ($ZONEINFO first, the copy built into zklock where
the host has none); a daylight-saving change neither skips nor doubles a
day. Its record, <lock path>.run, says who ran it, when, and how it
ended: succeeded, or failed with its cause (error: a non-zero exit;
signal: stopped by a signal passed on; hold-limit: stopped by --max-hold,
recorded just before the limit; lost: the lock was lost).
--retry-failed runs it again in a period whose run failed; 'zklock job
--reset <lock path>' clears the record so that the next start runs it.

Exit status:

	the command's own exit status, or 128+N if signal N killed it
	2      usage error (unknown flag, invalid lock path, missing command), or
	       the path is used by another recipe (another library's, or another
	       kind of zklock lock: --read on a --semaphore path, say), which would
	       not see this lock's node; the message names the node and its recipe
	69     ZooKeeper could not be reached: no session within --connect-timeout
	       (with --try, at most 3s), or contact lost while waiting; the
	       message names the cause (refused, not ZooKeeper, no answer).
	       An outage is 69 even when --timeout expires meanwhile.
	70     zklock failed for another reason (e.g. ZooKeeper refused a request)
	73     --try: the lock is held, or others wait for it
	75     --timeout expired while the lock was held by others
	76     the lock was lost while the command ran; the command was stopped
	79     the command reached --max-hold; it was stopped (SIGTERM --grace
	       before the limit, at most half of it; SIGKILL a tenth of the limit,
	       at most 1s, before it: it never outlives the lock) and the lock
	       released
	80     --once-per: not run, as this period's run was made already, or
	       another host holds the job's lock (running it, or checking);
	       --not-run-exit N exits N instead (0 for cron and systemd
	       timers), and --quiet prints nothing then
	126    the command cannot be run
	127    the command was not found
	128+N  zklock received signal N while still waiting for the lock

Examples:

	zklock exec /locks/backup -- ./backup.sh --full
	zklock exec --timeout 5m /locks/deploy -- make deploy
	zklock exec --try /locks/report -- ./report.sh || echo "report already running"
	zklock exec --read /locks/catalog -- ./export.sh
	zklock exec --semaphore 4 /locks/encoders -- ./encode.sh input.mov
	zklock exec --semaphore 4 --permits 2 /locks/encoders -- ./encode-4k.sh input.mov
	zklock exec /locks/db --and /locks/cache -- ./migrate.sh
	zklock exec --once-per day --at 02:00 --tz Europe/Berlin --quiet --not-run-exit 0 /jobs/nightly -- ./nightly.sh
`,
	flags: func(fs *flag.FlagSet) {
		addConnFlags(fs)
		fs.Duration("timeout", 0, "give up (exit 75) if the lock is not acquired within this `duration`; 0 waits for ever")
		fs.Bool("try", false, "do not wait: exit 73 at once if the lock is held or others wait for it (and 69 within 3s if ZooKeeper cannot be reached)")
		fs.Duration("session-timeout", zklock.DefaultSessionTimeout, "ZooKeeper session timeout (a `duration`): how long an unreachable holder keeps the lock")
		fs.Duration("grace", 10*time.Second, "after losing the lock, how long the command gets between SIGTERM and SIGKILL (a `duration`); the SIGKILL comes sooner if the lock may expire sooner")
		fs.String("owner", "", "`name` recorded in the lock node for 'zklock status' (default: the command's base name)")
		fs.Bool("verbose", false, "log ZooKeeper session events to stderr")
		fs.Bool("read", false, "take the lock as a reader of a read/write lock")
		fs.Bool("write", false, "take the lock as the writer of a read/write lock")
		fs.Int("semaphore", 0, "take one of `N` leases of a semaphore, N at least 1 (without it the lock is exclusive)")
		addPermitsFlag(fs)
		fs.Bool("kazoo", false, "with --read or --write: name the nodes as kazoo's ReadLock and WriteLock do")
		fs.String("value", "", "campaign as the leader of an election with this `value` ('zklock leader <path>' shows it): an exclusive lock that publishes it")
		fs.Var(&periodFlag{}, "once-per", "run the command at most once per `period` of ZooKeeper's clock (a duration, or day, week or month with --at and --tz), whichever host starts it first (a crontab line on every host): others exit 80 at once, naming the run")
		addCalendarFlags(fs)
		fs.Bool("quiet", false, "with --once-per: print nothing when the command is not run (not this host's turn)")
		fs.Int("not-run-exit", exitNotThisTime, "with --once-per: the exit `code` when the command is not run (0 for cron and systemd timers)")
		fs.Bool("retry-failed", false, "with --once-per: run the command again in a period whose run failed (non-zero exit, stopped, or its runner died or lost the lock)")
		fs.Duration("max-hold", 0, "hold the lock at most this `duration` (from the first path's grant): the command gets SIGTERM --grace before the limit (at most half the limit) and SIGKILL a tenth of the limit (at most 1s) before it, so it never outlives the lock; then release, and exit 79; 0 for no limit, negative refused")
		fs.Bool("revocable", false, "stop the command (SIGTERM, SIGKILL after --grace) and release when asked to ('zklock break --ask', Curator's Revoker)")
		fs.String("http", "", "with --value: serve /leader (200 only while this process leads, else 503 naming the leader) and /healthz on this `address` (:8081, say)")
		fs.Var(&pathList{}, "and", "also take the lock at this `path` (repeatable): all paths are taken together, as one lease")
	},
	parse: parseExecArgs,
	run:   runExec,
}

// parseExecArgs takes flags before the lock path and between it and the
// command; everything from the command on is the command's own.
func parseExecArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return nil, nil
	}
	if err := fs.Parse(rest[1:]); err != nil {
		return nil, err
	}
	return append([]string{rest[0]}, fs.Args()...), nil
}

// pathList is the value of the repeatable --and flag.
type pathList []string

func (p *pathList) String() string     { return strings.Join(*p, ",") }
func (p *pathList) Set(v string) error { *p = append(*p, v); return nil }
func (p *pathList) Get() any           { return []string(*p) }

// forwarded are the signals passed on to the command.
var forwarded = map[os.Signal]string{
	syscall.SIGINT:  "SIGINT",
	syscall.SIGTERM: "SIGTERM",
	syscall.SIGHUP:  "SIGHUP",
	syscall.SIGQUIT: "SIGQUIT",
}

func runExec(fset *flag.FlagSet, pos []string, stdout, stderr io.Writer) int {
	o, code := execOptsOf(fset, pos, stderr)
	if o == nil {
		return code
	}
	o.stderr = stderr
	sigs := make(chan os.Signal, 8)
	for s := range forwarded {
		signal.Notify(sigs, s)
	}
	defer signal.Stop(sigs)
	// Caught, not ignored: a write to a closed stderr fails (EPIPE), and the command starts with SIGPIPE's default.
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	defer signal.Stop(pipe)

	if code := o.listenProbe(stderr); code != exitOK {
		return code
	}
	defer o.stopProbe()
	client, lease, code := o.acquire(sigs, stderr)
	if client == nil {
		return code
	}
	defer closeClient(client)
	return o.hold(lease, sigs, stdout, stderr)
}

// closeClient closes c. Close is bounded by the client's cleanup timeout:
// deletes that cannot get through a partition end with the session.
func closeClient(c *zklock.Client) { c.Close() }
