package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock/zktest"
)

// TestExecOncePerCalendarAcrossDST: three 'exec --once-per day --at 02:30
// --tz Europe/Berlin' hosts per round, with ZooKeeper's clock moved across
// both of Berlin's 2026 daylight-saving changes, as docs/scheduled-jobs.md
// says: on 29 March the clock jumps from 02:00 CET to 03:00 CEST (01:00 UTC),
// skipping 02:30, and the day begins at the jump; on 25 October it falls
// back from 03:00 CEST to 02:00 CET (01:00 UTC), reading 02:30 twice, and the
// day begins at the first, the second being the same day. Neither day is
// skipped or run twice.
//
// The server's clock is moved between rounds by restarting it with a new
// libfaketime shift (the target minus the real time as it starts), and each
// move is checked by a node's ctime. The zklock processes run on the real
// clock (Go reads the time without libc, and they are not started under
// libfaketime anyway): the slots come from ZooKeeper's time alone. Every
// target lies 5 minutes or more from a day's beginning.
func TestExecOncePerCalendarAcrossDST(t *testing.T) {
	t.Parallel()
	require.NotContains(t, os.Getenv("LD_PRELOAD"), "faketime", "the zklock processes must keep the real clock")
	rounds := []struct {
		at   string // the server's clock (UTC) as the hosts start
		ran  bool   // one host ran the command (else all three exit 80)
		day  string // the recorded run's day after the round
		what string
	}{
		{"2026-03-28T12:00:00Z", true, "2026-03-28", "13:00 CET, the day before the spring change"},
		{"2026-03-29T00:50:00Z", false, "2026-03-28", "01:50 CET: 29 March has not begun"},
		{"2026-03-29T01:05:00Z", true, "2026-03-29", "03:05 CEST: 02:30 was skipped, the day began at the jump (01:00 UTC)"},
		{"2026-03-29T20:00:00Z", false, "2026-03-29", "22:00 CEST, later that day"},
		{"2026-03-30T00:35:00Z", true, "2026-03-30", "02:35 CEST, the next day, an hour earlier in UTC"},
		{"2026-10-25T00:20:00Z", true, "2026-10-24", "02:20 CEST: still 24 October"},
		{"2026-10-25T00:35:00Z", true, "2026-10-25", "02:35 CEST, the first 02:30 began the day"},
		{"2026-10-25T01:35:00Z", false, "2026-10-25", "02:35 CET, the repeated hour: the same day"},
		{"2026-10-26T01:25:00Z", false, "2026-10-25", "02:25 CET, the next day not yet begun"},
		{"2026-10-26T01:35:00Z", true, "2026-10-26", "02:35 CET, the next day, an hour later in UTC"},
	}
	shift := time.Until(dstTime(t, rounds[0].at))
	zc := zktest.Start(t, zktest.WithClockShifts(shift))
	servers := strings.Join(zc.Addrs(), ",")
	path := lockPath(t)
	file := filepath.Join(t.TempDir(), "runs")
	line := []string{"exec", "--servers", servers, "--once-per", "day", "--at", "02:30", "--tz", "Europe/Berlin",
		path, "--", "sh", "-c", `echo "$ZKLOCK_TOKEN" >> $0; sleep 0.3`, file}
	runs := 0
	for i, r := range rounds {
		target := dstTime(t, r.at)
		if i > 0 {
			shift = moveServerClock(t, zc.Servers()[0], target)
		}
		checkServerClock(t, zc, fmt.Sprintf("%s.probe-%d", path, i), target, shift)
		t.Logf("round %d: server at %s (%s): one host runs: %v", i+1, r.at, r.what, r.ran)
		runRound(t, line, r.ran)
		if r.ran {
			runs++
		}
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		require.Len(t, strings.Fields(string(b)), runs, "round %d (%s): the command's runs so far", i+1, r.what)
		st := skewedJobState(t, servers, path)
		require.Equal(t, "day at 02:30 Europe/Berlin", st.Calendar)
		require.Equal(t, dstTime(t, r.day+"T00:00:00Z").Unix()/86400, st.Last.Slot, "round %d (%s): the recorded run's day", i+1, r.what)
		require.Equal(t, "succeeded", st.Last.Outcome)
		t.Logf("round %d: recorded day %s, run at %s by the server's clock", i+1, r.day, st.Last.Start)
	}
}

// moveServerClock restarts the server with its wall clock shifted so that
// it reads target as it starts, and returns the shift.
func moveServerClock(t *testing.T, s *zktest.Server, target time.Time) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, s.Kill())
	shift := time.Until(target)
	require.NoError(t, s.SetClockShift(shift))
	require.NoError(t, s.Restart(ctx))
	return shift
}

// checkServerClock creates a node and checks that its ctime, the server's
// clock, is the real time shifted (within 3 s), and so target or the few
// seconds since, far from any day's beginning.
func checkServerClock(t *testing.T, zc *zktest.Cluster, probe string, target time.Time, shift time.Duration) {
	t.Helper()
	conn := zktest.Connect(t, zc.Addrs(), 10*time.Second)
	defer conn.Close()
	ctime := createdAt(t, conn, probe)
	require.InDelta(t, time.Now().Add(shift).UnixMilli(), ctime.UnixMilli(), 3000, "a node's ctime is the server's shifted clock (%v)", shift)
	require.WithinRange(t, ctime, target.Add(-3*time.Second), target.Add(time.Minute), "the server's clock reads %s", stamp(target))
}

func dstTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return v
}
