package main

// exec --once-per with a calendar unit: day, week or month, --at and --tz.

import (
	"flag"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // --tz on a host without a zone database (a scratch container)

	"github.com/zklock/zklock"
)

// periodFlag is --once-per's value: a duration, or a calendar unit.
type periodFlag struct {
	d    time.Duration // the duration; a unit's nominal length
	unit string        // "day", "week", "month", or "" for a duration
}

var units = map[string]time.Duration{zklock.Day: 24 * time.Hour, zklock.Week: 7 * 24 * time.Hour, zklock.Month: 31 * 24 * time.Hour}

func (p *periodFlag) String() string {
	if p == nil || p.d == 0 {
		return "0s"
	}
	if p.unit != "" {
		return p.unit
	}
	return p.d.String()
}

func (p *periodFlag) Set(s string) error {
	if d, ok := units[s]; ok {
		*p = periodFlag{d: d, unit: s}
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration (1h, 30m) or day, week or month")
	}
	if d < time.Millisecond { // 0 would be no --once-per: every host would run the command
		return fmt.Errorf("want a period of at least 1ms (leave --once-per out to run the command every time)")
	}
	*p = periodFlag{d: d}
	return nil
}

func (p *periodFlag) Get() any { return *p }

// addCalendarFlags adds --at and --tz to exec's flags.
func addCalendarFlags(fs *flag.FlagSet) {
	fs.String("at", "", "with --once-per day, week or month: the wall-clock `HH:MM` the period begins at (default 00:00)")
	fs.String("tz", "", "with --once-per day, week or month: the time `zone` of the calendar, as Europe/Berlin (default UTC)")
}

// calendarOf reads --once-per's unit, --at and --tz into o.cal; it returns
// a usage message or "".
func (o *execOpts) calendarOf(fset *flag.FlagSet) string {
	p := flagValue[periodFlag](fset, "once-per")
	o.oncePer = p.d
	at, tz := flagValue[string](fset, "at"), flagValue[string](fset, "tz")
	if p.unit == "" {
		if at != "" || tz != "" {
			return "--at and --tz set a calendar period: use them with --once-per day, week or month"
		}
		return ""
	}
	cal := zklock.Calendar{Unit: p.unit}
	if at != "" {
		t, err := time.Parse("15:04", at)
		if err != nil {
			return fmt.Sprintf("--at %q: want HH:MM, as 02:00", at)
		}
		cal.At = time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute
	}
	if tz != "" {
		loc, err := time.LoadLocation(tz)
		if err != nil || strings.EqualFold(tz, "local") {
			return fmt.Sprintf("--tz %q: not a time zone name, as Europe/Berlin or UTC", tz)
		}
		cal.Location = loc
	}
	o.cal = &cal
	return ""
}

// period names the job's period in messages: "1h0m0s", or the calendar.
func (o *execOpts) period() string {
	if o.cal != nil {
		return o.cal.String()
	}
	return o.oncePer.String()
}
