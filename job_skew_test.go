package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// TestJobRetryAndResetNeverRunAnEarlierPeriod: every operator action
// (RetryFailed, which 'zklock exec --retry-failed' is; Reset, which 'zklock
// job --reset' is, made as it makes it, by a job of a millisecond's period)
// against orders of leaders whose clocks are 10 minutes apart, as
// docs/scheduled-jobs.md ("Retry and reset") says: a retry or a start
// after a reset runs the period of the record it replaces, or a later one
// the clock gives, never an earlier one, and the record never moves back
// to an earlier period (issue 54).
//
// One server stands for the ensemble's leader: Kill, SetClockShift and
// Restart move ZooKeeper's time as a leader change does. Clock B (behind)
// reads 15 minutes into period n-1 of 20 minutes, clock A (ahead), 10
// minutes later, 5 minutes into period n. Each case is a list of steps,
// "CLOCK ACTION WANT": ok and fail are plain starts whose fn succeeds or
// fails, retry and retry-fail starts with RetryFailed, reset a Reset; WANT
// is the period the step runs (n-1 or n) or "-" for none. The cases share
// the server: the steps of every case that wait for the clock it reads run
// before it is moved. A case goes on after a wrong step, so that what the
// wrong state leads to shows too (issue 54's fourth round: the failed
// period run a second time by a plain start).
func TestJobRetryAndResetNeverRunAnEarlierPeriod(t *testing.T) {
	t.Parallel()
	const period, skew, behindPhase = 20 * time.Minute, 5 * time.Minute, 15 * time.Minute
	base := behindPhase + skew - time.Duration(time.Now().UnixMilli()%period.Milliseconds())*time.Millisecond
	if base > period/2 {
		base -= period
	}
	shift := map[string]time.Duration{"A": base + skew, "B": base - skew}
	zc := zktest.Start(t, zktest.WithClockShifts(shift["B"]))
	srv := zc.Servers()[0]
	slotOf := func(ms int64) int64 { return ms / period.Milliseconds() }

	cases := []struct {
		name  string
		steps string
	}{
		// --retry-failed
		{"issue 54: failed ahead, retried behind", "B ok n-1 | A fail n | B retry n | A ok - | B ok -"},
		{"failed ahead, retried ahead", "B ok n-1 | A fail n | A retry n | B ok - | A ok -"},
		{"failed ahead, retried behind twice", "A fail n | B retry-fail n | B retry n | A retry - | B ok -"},
		{"failed behind, retried ahead", "B fail n-1 | A retry n | B retry - | A ok -"},
		{"failed behind, retried behind", "B fail n-1 | B retry n-1 | A ok n | B retry -"},
		{"succeeded ahead, retried behind", "A ok n | B retry - | A retry - | B ok -"},
		// zklock job --reset
		{"failed ahead, reset behind, run behind", "B ok n-1 | A fail n | B reset | B ok n | A ok - | B ok -"},
		{"failed ahead, reset behind, run ahead", "A fail n | B reset | A ok n | B ok -"},
		{"failed ahead, reset ahead, run behind", "A fail n | A reset | B ok n | A ok -"},
		{"succeeded ahead, reset behind, run behind", "A ok n | B reset | B ok n | A ok - | B ok -"},
		{"failed behind, reset ahead, run behind", "B fail n-1 | A reset | B ok n | A ok -"},
		{"failed behind, reset behind, run behind", "B fail n-1 | B reset | B ok n-1 | A ok n | B ok -"},
		{"failed behind, reset behind, run ahead", "B fail n-1 | B reset | A ok n | B ok -"},
		{"reset twice across leaders", "A ok n | A reset | B reset | B ok n | A ok -"},
	}
	type step struct{ clock, action, want string }
	type state struct {
		path    string
		steps   []step
		next    int
		lastRec int64 // the record's slot after the last step (-1: none yet)
		log     []string
	}
	states := make([]*state, len(cases))
	for i, c := range cases {
		st := &state{path: fmt.Sprintf("/zklock-test/skewed-jobs/%d/lock", i), lastRec: -1}
		for _, s := range strings.Split(c.steps, "|") {
			f := strings.Fields(s)
			if len(f) == 2 {
				f = append(f, "-")
			}
			require.Len(t, f, 3, "case %q: step %q", c.name, s)
			st.steps = append(st.steps, step{f[0], f[1], f[2]})
		}
		states[i] = st
	}

	var n int64 // clock A's period; B's is n-1
	clock := "B"
	boom := errors.New("boom")
	for phase := 0; ; phase++ {
		pending := false
		for _, st := range states {
			pending = pending || st.next < len(st.steps)
		}
		if !pending {
			break
		}
		require.Less(t, phase, 20)
		if phase > 0 { // move ZooKeeper's time to the other clock, as a leader change does
			clock = map[string]string{"A": "B", "B": "A"}[clock]
			require.NoError(t, srv.Kill())
			require.NoError(t, srv.SetClockShift(shift[clock]))
			require.NoError(t, srv.Restart(ctxTimeout(t, time.Minute)))
		}
		c, err := zklock.Connect(ctxTimeout(t, 30*time.Second), zc.Addrs(), zklock.WithSessionTimeout(testSession))
		require.NoError(t, err)
		obs := zktest.Connect(t, zc.Addrs(), testSession)
		require.NoError(t, zklock.EnsureParents(ctxTimeout(t, 10*time.Second), c, "/zklock-test/skewed-jobs/x"))
		now := serverNow(t, obs.Conn, "/zklock-test/skewed-jobs/clock")
		if n == 0 {
			n = slotOf(now.UnixMilli()) + 1
		}
		require.Equal(t, map[string]int64{"A": n, "B": n - 1}[clock], slotOf(now.UnixMilli()),
			"clock %s (%v): ZooKeeper's time %s is in its period", clock, shift[clock], now.UTC().Format(time.RFC3339))
		name := map[int64]string{n - 1: "n-1", n: "n"}

		for i, st := range states {
			for ; st.next < len(st.steps) && st.steps[st.next].clock == clock; st.next++ {
				s := st.steps[st.next]
				ctx := ctxTimeout(t, 20*time.Second)
				ran := "-"
				fn := func(fail bool) func(context.Context) error {
					return func(context.Context) error {
						ran = "called"
						if fail {
							return boom
						}
						return nil
					}
				}
				var run zklock.Run
				switch s.action {
				case "ok", "fail", "retry", "retry-fail":
					var opts []zklock.JobOption
					if strings.HasPrefix(s.action, "retry") {
						opts = append(opts, zklock.RetryFailed())
					}
					j, err := c.NewJob(st.path, period, opts...)
					require.NoError(t, err)
					run, err = j.Run(ctx, fn(strings.HasSuffix(s.action, "fail")))
					switch {
					case ran == "-":
						require.ErrorIs(t, err, zklock.ErrRanThisPeriod, "case %q step %d", cases[i].name, st.next+1)
					case strings.HasSuffix(s.action, "fail"):
						require.ErrorIs(t, err, boom)
					default:
						require.NoError(t, err)
					}
					if ran != "-" {
						ran = name[run.Slot]
						if ran == "" {
							ran = fmt.Sprintf("n%+d", run.Slot-n)
						}
					}
				case "reset":
					j, err := c.NewJob(st.path, time.Millisecond) // as 'zklock job --reset' makes it
					require.NoError(t, err)
					_, _, err = j.Reset(ctx)
					require.NoError(t, err)
				default:
					t.Fatalf("case %q: unknown action %q", cases[i].name, s.action)
				}
				j, err := c.NewJob(st.path, period)
				require.NoError(t, err)
				last, err := j.LastRun(ctx)
				require.NoError(t, err)
				st.log = append(st.log, fmt.Sprintf("%s %s: ran %s, record (n%+d, %s)", s.clock, s.action, ran, last.Slot-n, last.Outcome))
				t.Logf("case %q step %d: clock %s, %s: ran %s; the record: period n%+d, %s", cases[i].name, st.next+1, s.clock, s.action, ran, last.Slot-n, last.Outcome)
				so := strings.Join(st.log, "; ")
				if s.want != ran {
					t.Errorf("case %q step %d (%s %s): ran %s, want %s; so far: %s", cases[i].name, st.next+1, s.clock, s.action, ran, s.want, so)
				}
				if last.Slot < st.lastRec {
					t.Errorf("case %q step %d (%s %s): the record moved back from period n%+d to n%+d; so far: %s",
						cases[i].name, st.next+1, s.clock, s.action, st.lastRec-n, last.Slot-n, so)
				}
				st.lastRec = last.Slot
			}
		}
		c.Close()
		obs.Close()
	}
}
