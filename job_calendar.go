package zklock

import (
	"fmt"
	"time"
)

// A Calendar is a job's period in a time zone's calendar, for NewCalendarJob:
// a day, a week (from Monday) or a month, beginning At into its first day
// (02:00 is 2 * time.Hour) by the wall clock of Location. The slots are
// still read from ZooKeeper's clock (UTC), converted into the zone: a host's
// clock and zone play no part.
//
// Daylight-saving changes neither skip nor double a period: a period begins
// when the zone's wall clock first reads At or later on its first day, so on
// the day the clock skips At (02:30 where 02:00 jumps to 03:00) it begins at
// the jump, and on the day the clock reads At twice (02:30 where 03:00 falls
// back to 02:00) it begins at the first.
type Calendar struct {
	Unit     string         // "day", "week" (beginning on Monday) or "month" (on its 1st)
	At       time.Duration  // from 0 to 24h (exclusive): the wall-clock time the period begins at
	Location *time.Location // the zone; nil is UTC
}

// The calendar units.
const (
	Day   = "day"
	Week  = "week"
	Month = "month"
)

// nominal is a unit's usual length, for Run.Period and monitoring.
var nominal = map[string]time.Duration{Day: 24 * time.Hour, Week: 7 * 24 * time.Hour, Month: 31 * 24 * time.Hour}

func (c Calendar) check() error {
	if _, ok := nominal[c.Unit]; !ok {
		return fmt.Errorf("%w: calendar unit %q: want day, week or month", ErrInvalidArgument, c.Unit)
	}
	if c.At < 0 || c.At >= 24*time.Hour {
		return fmt.Errorf("%w: calendar offset %v: want from 0 to 24h (exclusive)", ErrInvalidArgument, c.At)
	}
	return nil
}

func (c Calendar) loc() *time.Location {
	if c.Location == nil {
		return time.UTC
	}
	return c.Location
}

// String names the schedule as records keep it: "day at 02:00 Europe/Berlin".
func (c Calendar) String() string {
	at := fmt.Sprintf("%02d:%02d", int(c.At/time.Hour), int(c.At%time.Hour/time.Minute))
	if s := c.At % time.Minute; s != 0 {
		at += fmt.Sprintf(":%02d", int(s/time.Second))
	}
	return fmt.Sprintf("%s at %s %s", c.Unit, at, c.loc())
}

// slot is the period holding ms (the server's time in milliseconds since
// 1970): for a day, the civil day number (days since 1970-01-01) of the
// date the period began; for a week, the number of weeks since Monday
// 1969-12-29; for a month, year·12 + month - 1.
func (c Calendar) slot(ms int64) int64 {
	y, m, d := time.UnixMilli(ms).In(c.loc()).Date()
	day := civilDay(y, m, d)
	switch {
	case ms < c.begin(day):
		day-- // before the day's beginning: the period of the day before
	case ms >= c.begin(day+1):
		day++ // a zone whose clock fell back across midnight
	}
	switch c.Unit {
	case Week:
		return floorDiv(day+3, 7) // 1969-12-29, day -3, was a Monday
	case Month:
		y, m, _ := time.Unix(day*86400, 0).UTC().Date()
		return int64(y)*12 + int64(m) - 1
	}
	return day
}

// begin is when the day numbered day begins by c (in milliseconds): the
// first instant at which the zone's wall clock reads that date and At or
// later. Where the clock reads At twice, the first; where it skips At, the
// jump.
func (c Calendar) begin(day int64) int64 {
	loc := c.loc()
	wall := day*86400_000 + c.At.Milliseconds() // the date and At, as if UTC
	before := offsetAt(loc, wall-86400_000)     // the zone's offsets a day either side
	after := offsetAt(loc, wall+86400_000)      // (no zone changes twice in two days)
	first := int64(-1)
	for _, off := range []int64{before, after} {
		u := wall - off
		if offsetAt(loc, u) == off && (first < 0 || u < first) {
			first = u // u reads the date and At
		}
	}
	if first >= 0 {
		return first
	}
	// At is skipped: the jump from before to after lies in (wall-after, wall-before].
	lo, hi := wall-after, wall-before
	for lo+1 < hi {
		mid := lo + (hi-lo)/2
		if offsetAt(loc, mid) == after {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// offsetAt is the zone's offset from UTC at ms, in milliseconds.
func offsetAt(loc *time.Location, ms int64) int64 {
	_, off := time.UnixMilli(ms).In(loc).Zone()
	return int64(off) * 1000
}

// start is when slot began, in milliseconds.
func (c Calendar) start(slot int64) int64 {
	var day int64
	switch c.Unit {
	case Week:
		day = slot*7 - 3
	case Month:
		y, m := floorDiv(slot, 12), slot-floorDiv(slot, 12)*12+1
		day = civilDay(int(y), time.Month(m), 1)
	default:
		day = slot
	}
	return c.begin(day)
}

// civilDay is the number of days from 1970-01-01 to y-m-d.
func civilDay(y int, m time.Month, d int) int64 {
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
