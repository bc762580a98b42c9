#!/usr/bin/env bash
# zklock in half a minute: builds bin/zklock, starts a
# throwaway ZooKeeper, queues four workers on one lock and shows them served in
# arrival order, then breaks a holder's lock and shows its command stopped and
# the next worker taking over, and last freezes a holder past its session and
# shows its write, when it thaws, refused by the fence (docs/fencing.md) in a
# SQLite file both holders write to. Needs python3 (its sqlite3), ps and pgrep.
# Everything it starts is stopped on exit. Run: make demo
set -euo pipefail
cd "$(dirname "$0")/.."

LOCK=/demo/lock
ZK=bin/zklock
tmp=$(mktemp -d)
server_pid=
frozen= # the process group of a frozen worker's command
declare -a pid # pid[N]: the zklock exec of worker N

die() {
	echo "demo: $*" >&2
	exit 1
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	for p in "${pid[@]}"; do
		kill -TERM "$p" 2>/dev/null || true # zklock passes it on to the worker
		kill -CONT "$p" 2>/dev/null || true # a frozen one acts on it once thawed
	done
	if [ -n "$frozen" ]; then
		kill -CONT -- "-$frozen" 2>/dev/null || true
	fi
	if [ -n "$server_pid" ]; then
		kill -TERM "$server_pid" 2>/dev/null || true
	fi
	wait 2>/dev/null || true
	rm -rf "$tmp"
	if [ "$rc" != 0 ]; then
		echo "demo: failed (exit $rc)" >&2
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# until WHAT CMD...: polls CMD every 50ms, for at most 20s.
until_ok() {
	local what=$1 i
	shift
	for ((i = 0; i < 400; i++)); do
		if "$@"; then return 0; fi
		sleep 0.05
	done
	die "timed out waiting for $what"
}

# queue: the pids of the contenders for $LOCK, holder first, one per line.
queue() { "$ZK" status --json "$LOCK" | sed -n 's/.*"pid":\([0-9]*\).*/\1/p'; }
queued() { queue | grep -qx "$1"; }
has_lines() { [ -f "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ]; }

# worker N [zklock exec flags...] -- SCRIPT: starts worker N in the background
# and returns once it is seen in the lock's queue.
worker() {
	local n=$1
	shift
	"$ZK" exec --owner "worker $n" "$@" >"$tmp/w$n.out" 2>&1 &
	pid[n]=$!
	until_ok "worker $n to queue" queued "${pid[n]}"
}

# show_queue: the queue as worker numbers, holder in brackets.
show_queue() {
	local p n out=""
	for p in $(queue); do
		for n in "${!pid[@]}"; do
			if [ "${pid[n]}" = "$p" ]; then
				if [ -z "$out" ]; then out="[$n]"; else out="$out $n"; fi
			fi
		done
	done
	echo "${out:-(empty)}"
}

echo "== zklock demo: a fair lock on $LOCK, kept in a throwaway ZooKeeper"
command -v python3 >/dev/null 2>&1 || die "python3 not found: section 3 writes to SQLite with Python's sqlite3 (Debian: apt-get install python3)"
command -v ps >/dev/null 2>&1 && command -v pgrep >/dev/null 2>&1 || die "ps or pgrep not found: section 3 needs them (Debian: apt-get install procps)"
if [ -x scripts/install-zookeeper.sh ]; then
	out=$(scripts/install-zookeeper.sh 2>&1) || {
		echo "$out" >&2
		die "installing ZooKeeper failed"
	}
	echo "${out##*$'\n'}"
fi
go build -o bin/ ./cmd/zklock
echo "built $ZK"
"$ZK" server >"$tmp/server.out" 2>&1 &
server_pid=$!
server_up() {
	kill -0 "$server_pid" 2>/dev/null || {
		cat "$tmp/server.out" >&2
		die "zklock server exited"
	}
	grep -q '^ZKLOCK_SERVERS=' "$tmp/server.out"
}
until_ok "zklock server" server_up
ZKLOCK_SERVERS=$(sed -n 's/^ZKLOCK_SERVERS=//p' "$tmp/server.out")
export ZKLOCK_SERVERS
echo "started: $ZK server  ->  ZKLOCK_SERVERS=$ZKLOCK_SERVERS"

echo
echo "== 1. Four workers queue, each started once the previous one is seen waiting:"
echo "   $ZK exec --owner \"worker N\" $LOCK -- sh -c 'echo \"worker N got the lock (token \$ZKLOCK_TOKEN)\"; sleep 1'"
for n in 1 2 3 4; do
	worker "$n" "$LOCK" -- sh -c "echo \"worker $n got the lock (token \$ZKLOCK_TOKEN)\" | tee -a $tmp/served; sleep 1"
done
echo "\$ zklock status $LOCK"
"$ZK" status "$LOCK" | sed 's/^/  /'
echo "The queue moves (holder in brackets):"
for n in 1 2 3 4; do
	# Worker n's line is written while it holds; on a loaded machine it may
	# be done before the queue is shown, so the queue is shown as it is then.
	until_ok "worker $n's output" has_lines "$tmp/served" "$n"
	q=$(show_queue)
	printf '  %-14s %s\n' "$q" "$(sed -n "${n}p" "$tmp/served")"
done
for n in 1 2 3 4; do
	wait "${pid[n]}" || die "worker $n exited with $?"
done
unset 'pid[1]' 'pid[2]' 'pid[3]' 'pid[4]'
order=$(awk '{printf "%s%s", sep, $2; sep=" "}' "$tmp/served")
tokens=$(sed 's/.*token \([0-9]*\).*/\1/' "$tmp/served" | paste -sd' ')
[ "$order" = "1 2 3 4" ] || die "served in order $order, not 1 2 3 4"
sort -nc <(tr ' ' '\n' <<<"$tokens") || die "tokens not increasing: $tokens"
echo "Served in arrival order ($order); fencing tokens increase ($tokens)."

echo
echo "== 2. An operator breaks the lock of a holder (zklock break):"
echo "   worker 5 holds the lock (--session-timeout 2s --grace 1s); worker 6 waits"
worker 5 --session-timeout 2s --grace 1s "$LOCK" -- sh -c \
	'trap "echo \"worker 5 got SIGTERM: stopping\"; exit 143" TERM
	 echo "worker 5 got the lock (token $ZKLOCK_TOKEN)"; sleep 30 & wait'
until_ok "worker 5 to start" has_lines "$tmp/w5.out" 1
worker 6 "$LOCK" -- sh -c 'echo "worker 6 got the lock (token $ZKLOCK_TOKEN)"; sleep 1'
echo "\$ zklock break --yes $LOCK"
"$ZK" break --yes "$LOCK" | sed 's/^/  /'
rc5=0
wait "${pid[5]}" || rc5=$?
rc6=0
wait "${pid[6]}" || rc6=$?
unset 'pid[5]' 'pid[6]'
echo "worker 5's zklock exec exited $rc5 (lock lost); its output:"
fold -s -w 100 "$tmp/w5.out" | sed 's/^/  /'
echo "worker 6's zklock exec exited $rc6; its output:"
sed 's/^/  /' "$tmp/w6.out"
[ "$rc5" = 76 ] || die "worker 5 exited $rc5, want 76"
[ "$rc6" = 0 ] || die "worker 6 exited $rc6, want 0"
grep -q 'worker 5 got SIGTERM' "$tmp/w5.out" || die "worker 5 did not get SIGTERM"
grep -q 'worker 6 got the lock' "$tmp/w6.out" || die "worker 6 did not get the lock"

echo
echo "== 3. A holder frozen past its 2s session writes anyway once thawed: the fence refuses it"
echo "   Both workers write a report to SQLite, checking the fence first (docs/fencing.md's report.py);"
echo "   worker 7's command stops itself (kill -STOP) just before its write, and its zklock is stopped too."
db=$tmp/reports.db
# The fence's SQLite install script (what zklock-fence install runs), and
# the reports table.
python3 -c 'import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.executescript(open(sys.argv[2]).read())
db.execute("CREATE TABLE reports (day TEXT, body TEXT)")' "$db" fence/sql/sqlite.sql
# report.py DB WHO [--no-fence]: docs/fencing.md's Python example, with the
# lock's path as the fence name, WHO as the report, and the check skipped
# with --no-fence.
cat >"$tmp/report.py" <<'EOF'
import os
import sqlite3
import sys

token = int(os.environ["ZKLOCK_TOKEN"])
who, fenced = sys.argv[2], "--no-fence" not in sys.argv[3:]
db = sqlite3.connect(sys.argv[1], timeout=10, isolation_level="IMMEDIATE")
try:
    with db:
        if fenced:
            db.execute("INSERT INTO zklock_fence_check (name, token) VALUES (?, ?)", (os.environ["ZKLOCK_PATH"], token))
        db.execute("INSERT INTO reports (day, body) VALUES (date('now'), ?)", (who if fenced else who + ", unfenced",))
    print(f"{who} wrote its report (token {token})" if fenced else
          f"without the fence, the same write lands after worker 8's (token {token})")
except sqlite3.IntegrityError as e:
    if "zklock_fence: stale token" not in str(e):
        raise
    sys.exit(f"{who}'s write REFUSED by the fence (token {token}): {e}")
finally:
    db.close()
EOF
worker 7 --session-timeout 2s --grace 1s "$LOCK" -- sh -c \
	'echo $$ >"$1/w7.pid"; echo "worker 7 got the lock (token $ZKLOCK_TOKEN), then froze"
	 kill -STOP $$
	 python3 "$1/report.py" "$1/reports.db" "worker 7" || true
	 python3 "$1/report.py" "$1/reports.db" "worker 7" --no-fence
	 echo "worker 7 done"; sleep 30 & wait' sh "$tmp"
# Worker 7 freezes whole, as a paused machine does: its command (its process
# group's leader) stops itself just before its write; then the group, where
# zklock's reaper is (it kills the group once zklock, stopped, no longer says
# the lease holds), and zklock. On a thaw nothing orders the command's write
# before zklock's news of the loss: the demo thaws the command first.
stopped() { [ -f "$tmp/w7.pid" ] && case $(ps -o stat= -p "$(cat "$tmp/w7.pid")") in T*) true ;; *) false ;; esac; }
until_ok "worker 7's command to stop itself" stopped
frozen=$(cat "$tmp/w7.pid")
has_reaper() { [ "$(pgrep -g "$frozen" | wc -l)" -ge 2 ]; }
until_ok "worker 7's reaper" has_reaper
kill -STOP -- "-$frozen"
kill -STOP "${pid[7]}"
worker 8 "$LOCK" -- sh -c 'echo "worker 8 got the lock (token $ZKLOCK_TOKEN)"; python3 "$1/report.py" "$1/reports.db" "worker 8"' sh "$tmp"
until_ok "worker 8 to write" has_lines "$tmp/w8.out" 2
sed 's/^/  /' "$tmp/w7.out"
sed 's/^/  /' "$tmp/w8.out"
echo "  worker 7's command thaws before its zklock and goes on with its write:"
kill -CONT "$frozen"
until_ok "worker 7's writes" grep -q '^worker 7 done' "$tmp/w7.out"
kill -CONT -- "-$frozen"
kill -CONT "${pid[7]}"
frozen=
rc7=0
wait "${pid[7]}" || rc7=$?
rc8=0
wait "${pid[8]}" || rc8=$?
unset 'pid[7]' 'pid[8]'
sed -n '2,3p' "$tmp/w7.out" | fold -s -w 110 | sed 's/^/    /'
reports=$(python3 -c 'import sqlite3, sys; print(" | ".join(r[0] for r in sqlite3.connect(sys.argv[1]).execute("SELECT body FROM reports ORDER BY rowid")))' "$db")
echo "  reports.db holds: $reports"
echo "  worker 7's zklock, thawed, exited $rc7 (lock lost) and stopped its command"
[ "$rc7" = 76 ] || die "worker 7 exited $rc7, want 76"
[ "$rc8" = 0 ] || die "worker 8 exited $rc8, want 0"
grep -q "^worker 7's write REFUSED by the fence" "$tmp/w7.out" || die "worker 7's fenced write was not refused"
[ "$reports" = "worker 8 | worker 7, unfenced" ] || die "reports.db holds $reports, want worker 8's report and worker 7's unfenced one"

echo
echo "Done: the server and the workers are stopped. Next: $ZK help exec"
