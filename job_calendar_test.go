package zklock_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
)

// berlin is Europe/Berlin from the zone file in testdata (not the host's
// database): in 2026 its clocks go from 02:00 to 03:00 on 29 March and from
// 03:00 back to 02:00 on 25 October.
func berlin(t testing.TB) *time.Location {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "zoneinfo", "Europe_Berlin"))
	require.NoError(t, err)
	loc, err := time.LoadLocationFromTZData("Europe/Berlin", data)
	require.NoError(t, err)
	return loc
}

// slotStarts scans [from, to) minute by minute and returns when each slot
// began (the first minute seen in it), failing on a slot that goes back or
// skips one.
func slotStarts(t *testing.T, cal zklock.Calendar, from, to time.Time) map[int64]time.Time {
	t.Helper()
	starts := map[int64]time.Time{}
	prev := int64(0)
	for at := from; at.Before(to); at = at.Add(time.Minute) {
		s := zklock.CalendarSlot(cal, at.UnixMilli())
		if at != from && s != prev && s != prev+1 { // a plain check: this runs for every minute of a year
			t.Fatalf("%v at %v: slot %d after %d", cal, at, s, prev)
		}
		if _, ok := starts[s]; !ok {
			starts[s] = at
		}
		prev = s
	}
	return starts
}

// TestPureCalendarDaysAcrossDST: a day in Europe/Berlin begins at its
// wall-clock time on each of the days around both 2026 transitions, one
// period a day: the spring day whose clock skips 02:30 begins at the jump
// (03:00 CEST), the autumn day whose clock reads 02:30 twice begins at the
// first, and the second is the same period.
func TestPureCalendarDaysAcrossDST(t *testing.T) {
	loc := berlin(t)
	utc := func(s string) time.Time { v, err := time.Parse(time.RFC3339, s); require.NoError(t, err); return v }
	for _, tc := range []struct {
		at     time.Duration
		spring string // when 29 March's period begins (UTC)
		autumn string // when 25 October's period begins (UTC)
	}{
		{0, "2026-03-28T23:00:00Z", "2026-10-24T22:00:00Z"},
		{2 * time.Hour, "2026-03-29T01:00:00Z", "2026-10-25T00:00:00Z"},                // 02:00 skipped: the jump; 02:00 CEST the first
		{2*time.Hour + 30*time.Minute, "2026-03-29T01:00:00Z", "2026-10-25T00:30:00Z"}, // the same
		{3 * time.Hour, "2026-03-29T01:00:00Z", "2026-10-25T02:00:00Z"},                // 03:00 CEST is the jump; 03:00 CET once
		{23*time.Hour + 30*time.Minute, "2026-03-29T21:30:00Z", "2026-10-25T22:30:00Z"},
	} {
		cal := zklock.Calendar{Unit: zklock.Day, At: tc.at, Location: loc}
		for _, season := range []struct {
			from, to, day string
			want          string
		}{
			{"2026-03-26T00:00:00Z", "2026-04-02T00:00:00Z", "2026-03-29", tc.spring},
			{"2026-10-22T00:00:00Z", "2026-10-29T00:00:00Z", "2026-10-25", tc.autumn},
		} {
			starts := slotStarts(t, cal, utc(season.from), utc(season.to))
			require.Contains(t, []int{7, 8}, len(starts), "%v from %s: one period a day (and a partial first, unless the scan begins on a boundary)", cal, season.from)
			day, err := time.Parse(time.DateOnly, season.day)
			require.NoError(t, err)
			slot := day.Unix() / 86400
			require.Equal(t, utc(season.want), starts[slot].UTC(), "%v: the period of %s", cal, season.day)
			for s, began := range starts {
				if began.Equal(utc(season.from)) || s == slot {
					continue
				}
				h, m, _ := began.In(loc).Clock()
				require.Equal(t, tc.at, time.Duration(h)*time.Hour+time.Duration(m)*time.Minute, "%v: slot %d began at %v", cal, s, began.In(loc))
			}
		}
	}
}

// TestPureCalendarWeeksAndMonths: weeks begin on Monday at the wall-clock
// time (across the autumn change), months on the 1st.
func TestPureCalendarWeeksAndMonths(t *testing.T) {
	loc := berlin(t)
	week := zklock.Calendar{Unit: zklock.Week, At: 2 * time.Hour, Location: loc}
	starts := slotStarts(t, week, time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 10, 0, 0, 0, 0, time.UTC))
	require.Len(t, starts, 7)
	for _, began := range starts {
		if b := began.In(loc); !(b.Day() == 1 && b.Month() == 10 && b.Hour() < 3) {
			require.Equal(t, time.Monday, b.Weekday(), "%v", b)
			require.Equal(t, 2, b.Hour())
		}
	}
	month := zklock.Calendar{Unit: zklock.Month, At: 0, Location: loc}
	starts = slotStarts(t, month, time.Date(2026, 1, 15, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 15, 0, 0, 0, 0, time.UTC))
	require.Len(t, starts, 12)
	for s, began := range starts {
		if b := began.In(loc); s != zklock.CalendarSlot(month, time.Date(2026, 1, 15, 0, 0, 0, 0, time.UTC).UnixMilli()) {
			require.Equal(t, 1, b.Day(), "%v", b)
			require.Equal(t, 0, b.Hour(), "%v", b)
		}
	}
}

func TestPureCalendarRefusesBadUnitsAndOffsets(t *testing.T) {
	var c *zklock.Client
	for _, cal := range []zklock.Calendar{{Unit: "year"}, {Unit: zklock.Day, At: 24 * time.Hour}, {Unit: zklock.Day, At: -time.Minute}} {
		_, err := c.NewCalendarJob("/jobs/x", cal)
		require.ErrorIs(t, err, zklock.ErrInvalidArgument, "%+v", cal)
	}
}

// A calendar job against ZooKeeper: run once in its period, its record
// naming the calendar; a job on the same path with another schedule sees
// the run by its start.
func TestCalendarJobRunsOnceAndRecordsItsCalendar(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	c := connect(t)
	cal := zklock.Calendar{Unit: zklock.Day, At: 0, Location: berlin(t)}
	j, err := c.NewCalendarJob(p, cal)
	require.NoError(t, err)
	calls := 0
	run, err := j.Run(ctxTimeout(t, 10*time.Second), func(context.Context) error { calls++; return nil })
	require.NoError(t, err)
	require.Equal(t, "day at 00:00 Europe/Berlin", run.Calendar)
	require.Equal(t, 24*time.Hour, run.Period)
	require.Equal(t, zklock.CalendarSlot(cal, run.Start.UnixMilli()), run.Slot)
	again, err := j.Run(ctxTimeout(t, 10*time.Second), func(context.Context) error { calls++; return nil })
	require.ErrorIs(t, err, zklock.ErrRanThisPeriod)
	require.Equal(t, "day at 00:00 Europe/Berlin", again.Calendar)
	require.Equal(t, 1, calls)

	hourly, err := c.NewJob(p, time.Hour)
	require.NoError(t, err)
	_, err = hourly.Run(ctxTimeout(t, 10*time.Second), func(context.Context) error { calls++; return nil })
	require.ErrorIs(t, err, zklock.ErrRanThisPeriod, "the day's run started in this hour")
}
