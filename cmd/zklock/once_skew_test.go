package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock/zktest"
)

// TestExecOncePerAcrossSkewedLeaders: three 'exec --once-per' hosts per
// round against an ensemble whose servers' clocks disagree by minutes, with
// the leader changed between rounds, as docs/scheduled-jobs.md says ("When
// the servers' clocks disagree"): ZooKeeper's time is the leader's clock, so
// a leader change moves a slot by the skew, and no slot runs twice.
//
// The clocks are shifted with libfaketime in the servers' JVMs: ids 1, 2
// and 3 read base, base+5m and base-5m. ZooKeeper elects, among servers
// with the latest transaction, the one with the highest id, so killing the
// leader (once every server has the same zxid) hands the lead to id 3 or id
// 2 in turn; id 1 never leads. The leader's clock thus jumps by 10 minutes
// at every change. The period, 20 minutes, is larger than that jump, as an
// hourly job's is larger than minutes of skew: a jump moves a slot by the
// skew, and skips none. base (within ±10 minutes of the real time, the same
// for all three) puts id 3's clock 16 minutes into a period n-1 and id 2's
// 6 minutes into period n, so the rounds, a minute or two in all, stay
// clear of a boundary (4 minutes to the first that matters). Real periods
// of minutes, not a test build's, so the servers' own clocks decide:
//
//	round 1, id 3 leads (n-1): one host runs slot n-1
//	round 2, id 2 leads (n):   one host runs slot n, 10 minutes early by id 3's clock
//	round 3, id 3 leads (n-1): nobody runs: the record of slot n covers n-1
//	round 4, id 2 leads (n):   nobody runs: slot n was run
func TestExecOncePerAcrossSkewedLeaders(t *testing.T) {
	t.Parallel()
	const period, skew, behindPhase = 20 * time.Minute, 5 * time.Minute, 16 * time.Minute
	base := behindPhase + skew - time.Duration(time.Now().UnixMilli()%period.Milliseconds())*time.Millisecond
	if base > period/2 {
		base -= period
	}
	shifts := []time.Duration{base, base + skew, base - skew} // ids 1, 2 (ahead), 3 (behind)
	const ahead, behind = 1, 2                                // their indexes
	zc := zktest.Start(t, zktest.WithEnsemble(3), zktest.WithClockShifts(shifts...))
	servers := strings.Join(zc.Addrs(), ",")
	path := lockPath(t)
	slotOf := func(ms int64) int64 { return ms / period.Milliseconds() }

	leadBy(t, zc, behind)
	conn := zktest.Connect(t, zc.Addrs(), 10*time.Second)
	probe := createdAt(t, conn, path+".probe")
	require.InDelta(t, time.Now().Add(shifts[behind]).UnixMilli(), probe.UnixMilli(), 3000,
		"a node's ctime is the leader's shifted clock (id 3: %v)", shifts[behind])
	n := slotOf(probe.UnixMilli()) + 1 // id 3's period is n-1, id 2's n

	file := filepath.Join(t.TempDir(), "runs")
	line := []string{"exec", "--servers", servers, "--once-per", "20m", path, "--", "sh", "-c", `echo "$ZKLOCK_TOKEN" >> $0; sleep 0.3`, file}
	steps := []struct {
		leader int
		ran    bool
		slot   int64 // the recorded run's slot after the round
		clock  int64 // the slot of the leader's clock
	}{
		{behind, true, n - 1, n - 1},
		{ahead, true, n, n},
		{behind, false, n, n - 1},
		{ahead, false, n, n},
	}
	runs := 0
	for i, s := range steps {
		if i > 0 {
			changeLeader(t, zc, steps[i-1].leader, s.leader)
		}
		before := time.Now()
		runRound(t, line, s.ran)
		if s.ran {
			runs++
		}
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		require.Len(t, strings.Fields(string(b)), runs, "round %d: the command's runs so far", i+1)
		st := skewedJobState(t, servers, path)
		require.Equal(t, s.slot, st.Last.Slot, "round %d: the recorded run's slot", i+1)
		require.Equal(t, "succeeded", st.Last.Outcome)
		mtime := modifiedAt(t, conn, path+".run")
		require.Equal(t, s.clock, slotOf(mtime.UnixMilli()), "round %d: the record was last written in the leader's slot", i+1)
		require.InDelta(t, before.Add(shifts[s.leader]).UnixMilli(), mtime.UnixMilli(), float64((time.Since(before) + 3*time.Second).Milliseconds()),
			"round %d: ZooKeeper's time is the leader's clock (%v)", i+1, shifts[s.leader])
		t.Logf("round %d: server %d leads (clock %+v): %d run(s) so far, the record's slot %d (n%+d), written at %s on the leader's clock (its slot n%+d)",
			i+1, s.leader+1, shifts[s.leader].Round(time.Second), runs, st.Last.Slot, st.Last.Slot-n, stamp(mtime), slotOf(mtime.UnixMilli())-n)
		if i == 1 { // slot n ran while id 3's clock was still in n-1: moved by the skew
			require.Less(t, time.Now().Add(shifts[behind]).UnixMilli(), n*period.Milliseconds())
		}
	}
}

// runRound starts the same line on three hosts at once and checks that
// exactly one ran the command (ran) or none did; the others exit 80.
func runRound(t *testing.T, line []string, ran bool) {
	t.Helper()
	procs := []*proc{start(t, line...), start(t, line...), start(t, line...)}
	codes := map[int]int{}
	for _, p := range procs {
		code := p.wait(t, 30*time.Second)
		codes[code]++
		if code == exitNotThisTime {
			require.Contains(t, p.errText(), "zklock: not run: ")
		} else {
			require.Equal(t, 0, code, p.errText())
		}
	}
	want := map[int]int{exitNotThisTime: 3}
	if ran {
		want = map[int]int{0: 1, exitNotThisTime: 2}
	}
	require.Equal(t, want, codes)
}

// skewedJobState is 'zklock job --json' against the given servers.
func skewedJobState(t *testing.T, servers, path string) jobJSON {
	t.Helper()
	code, stdout, stderr := runZK(t, 30*time.Second, "job", "--json", "--servers", servers, path)
	require.Equal(t, 0, code, stderr)
	var st jobJSON
	require.NoError(t, json.Unmarshal([]byte(stdout), &st), stdout)
	return st
}

// leadBy makes server index want the leader, killing and restarting the
// leader until it is: the survivors elect the highest id, so one change
// does it for the highest id (index 2).
func leadBy(t *testing.T, zc *zktest.Cluster, want int) {
	t.Helper()
	for range 3 {
		l := leaderOf(t, zc)
		if l == want {
			return
		}
		changeLeader(t, zc, l, -1)
	}
	t.Fatalf("server %d does not lead after 3 changes", want+1)
}

// changeLeader kills the leader (index from) once every server has applied
// the same transactions, waits for the new leader (index to, unless
// negative), and restarts the old one as a follower.
func changeLeader(t *testing.T, zc *zktest.Cluster, from, to int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	awaitSameZxid(t, zc)
	require.NoError(t, zc.Servers()[from].Kill())
	require.NoError(t, zc.WaitHealthy(ctx))
	if to >= 0 {
		require.Equal(t, to, leaderOf(t, zc), "the highest id among the survivors leads")
	}
	require.NoError(t, zc.Servers()[from].Restart(ctx))
	require.NoError(t, zc.WaitHealthy(ctx))
}

func leaderOf(t *testing.T, zc *zktest.Cluster) int {
	t.Helper()
	l, err := zc.Leader()
	require.NoError(t, err)
	return l
}

var srvrZxid = regexp.MustCompile(`(?m)^Zxid: (0x[0-9a-f]+)$`)

// awaitSameZxid waits until every running server reports the same last
// applied transaction (srvr), so that an election goes by id alone.
func awaitSameZxid(t *testing.T, zc *zktest.Cluster) {
	t.Helper()
	// Each session's create and close is a transaction: under load the three
	// reads can straddle one several times, so this waits longer than most.
	// A follower says zxid 0x0 until it applies a transaction of the new
	// epoch (measured: [0x0 0x200000000 0x0] for 45 s after an election), so
	// a mismatch that lasts makes one: a session opened and closed.
	deadline := time.Now().Add(45 * time.Second)
	nudge := time.Now().Add(time.Second)
	for {
		zxids := make([]string, len(zc.Servers()))
		for i, s := range zc.Servers() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			out, err := zktest.FourLetter(ctx, s.Addr(), "srvr")
			cancel()
			if m := srvrZxid.FindStringSubmatch(out); err == nil && m != nil {
				zxids[i] = m[1]
			} else {
				zxids[i] = fmt.Sprintf("(%v: %q)", err, strings.TrimSpace(out))
			}
		}
		if !slices.ContainsFunc(zxids, func(z string) bool { return z != zxids[0] }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for every server at the same zxid: %v", zxids)
		}
		if time.Now().After(nudge) {
			zktest.Connect(t, zc.Addrs(), 10*time.Second).Close()
			nudge = time.Now().Add(2 * time.Second)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// createdAt creates a node and returns its ctime: the leader's clock.
func createdAt(t *testing.T, conn *zktest.Client, path string) time.Time {
	t.Helper()
	require.NoError(t, ensurePath(conn, filepath.Dir(path)))
	_, err := conn.Create(path, nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	_, stat, err := conn.Get(path)
	require.NoError(t, err)
	return time.UnixMilli(stat.Ctime)
}

// modifiedAt is a node's mtime, read again while the connection moves to
// a new leader.
func modifiedAt(t *testing.T, conn *zktest.Client, path string) time.Time {
	t.Helper()
	var stat *zk.Stat
	eventually(t, "reading "+path, func() bool {
		var err error
		_, stat, err = conn.Get(path)
		return err == nil
	})
	return time.UnixMilli(stat.Mtime)
}

// ensurePath creates path and its parents as plain nodes.
func ensurePath(conn *zktest.Client, path string) error {
	p := ""
	for _, part := range strings.Split(strings.Trim(path, "/"), "/") {
		p += "/" + part
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("creating %s: %w", p, err)
		}
	}
	return nil
}

// TestExecRetryAndResetAcrossSkewedLeaders: issue 54's rounds, with the
// processes an operator runs, on the ensemble of
// TestExecOncePerAcrossSkewedLeaders (id 3's clock in period n-1, id 2's,
// 10 minutes ahead, in n). A retry (--retry-failed) and the start after a
// reset (zklock job --reset) on the leader behind run the failed or reset
// period n, never n-1, which its clock gives and which succeeded, and the
// record never moves back, so that the plain hosts after them on the
// leader ahead find n run:
//
//	round 1, id 3 leads (n-1): three hosts, one runs n-1, which succeeds
//	round 2, id 2 leads (n):   three hosts, one runs n, which fails (exit 3)
//	round 3, id 3 leads (n-1): --retry-failed runs n (on 42fd6c9: n-1, recorded as n-1)
//	round 4, id 2 leads (n):   three hosts, none runs (on 42fd6c9: one ran n again)
//	round 5, id 3 leads (n-1): zklock job --reset, then three hosts: one runs n
//	round 6, id 2 leads (n):   three hosts, none runs
func TestExecRetryAndResetAcrossSkewedLeaders(t *testing.T) {
	t.Parallel()
	const period, skew, behindPhase = 20 * time.Minute, 5 * time.Minute, 16 * time.Minute
	base := behindPhase + skew - time.Duration(time.Now().UnixMilli()%period.Milliseconds())*time.Millisecond
	if base > period/2 {
		base -= period
	}
	shifts := []time.Duration{base, base + skew, base - skew} // ids 1, 2 (ahead), 3 (behind)
	const ahead, behind = 1, 2
	zc := zktest.Start(t, zktest.WithEnsemble(3), zktest.WithClockShifts(shifts...))
	servers := strings.Join(zc.Addrs(), ",")
	path := lockPath(t)
	leadBy(t, zc, behind)
	conn := zktest.Connect(t, zc.Addrs(), 10*time.Second)
	n := createdAt(t, conn, path+".probe").UnixMilli()/period.Milliseconds() + 1

	file := filepath.Join(t.TempDir(), "runs")
	cmd := func(status int, flags ...string) []string {
		line := append([]string{"exec", "--servers", servers, "--once-per", "20m"}, flags...)
		return append(line, path, "--", "sh", "-c", fmt.Sprintf(`echo "$ZKLOCK_TOKEN" >> $0; sleep 0.3; exit %d`, status), file)
	}
	runs := func() int {
		b, err := os.ReadFile(file)
		if errors.Is(err, os.ErrNotExist) {
			return 0
		}
		require.NoError(t, err)
		return len(strings.Fields(string(b)))
	}
	steps := []struct {
		leader  int
		do      func()
		runs    int    // the command's runs so far
		slot    int64  // the record's slot after the round
		outcome string // and its outcome
	}{
		{behind, func() { runRound(t, cmd(0), true) }, 1, n - 1, "succeeded"},
		{ahead, func() {
			procs := []*proc{start(t, cmd(3)...), start(t, cmd(3)...), start(t, cmd(3)...)}
			codes := map[int]int{}
			for _, p := range procs {
				codes[p.wait(t, 30*time.Second)]++
			}
			require.Equal(t, map[int]int{3: 1, exitNotThisTime: 2}, codes)
		}, 2, n, "failed"},
		{behind, func() {
			p := start(t, cmd(0, "--retry-failed")...)
			require.Equal(t, 0, p.wait(t, 30*time.Second), "the retry ran: %s", p.errText())
		}, 3, n, "succeeded"},
		{ahead, func() { runRound(t, cmd(0), false) }, 3, n, "succeeded"},
		{behind, func() {
			code, _, stderr := runZK(t, 30*time.Second, "job", "--reset", "--servers", servers, path)
			require.Equal(t, 0, code, stderr)
			runRound(t, cmd(0), true)
		}, 4, n, "succeeded"},
		{ahead, func() { runRound(t, cmd(0), false) }, 4, n, "succeeded"},
	}
	for i, s := range steps {
		if i > 0 {
			changeLeader(t, zc, steps[i-1].leader, s.leader)
		}
		s.do()
		st := skewedJobState(t, servers, path)
		t.Logf("round %d: server %d leads (clock %+v): %d run(s) so far, the record: slot n%+d, %s",
			i+1, s.leader+1, shifts[s.leader].Round(time.Second), runs(), st.Last.Slot-n, st.Last.Outcome)
		require.Equal(t, s.runs, runs(), "round %d: the command's runs so far", i+1)
		require.Equal(t, s.slot, st.Last.Slot, "round %d: the record's slot (n=%d)", i+1, n)
		require.Equal(t, s.outcome, st.Last.Outcome, "round %d", i+1)
	}
}
