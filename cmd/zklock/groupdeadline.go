package main

// The deadlines of the command's process group. exec's one promise is that
// the command, and whatever it left in its process group, never outlives
// the lock. So every moment at which the lock may end (the hold limit, a
// loss, the session's expiry after zklock's own death or stop) is a moment
// by which the whole group must be dead, and that moment is kept by timers
// of their own, not by the loop that reports on stderr: a write that blocks
// (a full pipe), stops zklock (SIGTTOU) or kills it (SIGPIPE) must not
// delay a signal. Signal first, write after. The same moment is fed to the
// reaper (reaper.go), which keeps it if zklock dies or is stopped.

import (
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/zklock/zklock"
)

// groupDeadline owns the signals to the command's process group pgid.
type groupDeadline struct {
	pgid   int
	lease  *zklock.Lease
	reaper *reaper
	// slack is how long after the lease's loss deadline the session is
	// still alive at the earliest: the deadline is 80 % of the granted
	// session timeout after the leader last heard from zklock, and the
	// session cannot expire before 100 %; the group is dead by half way.
	slack time.Duration
	// timeout is the session's timeout now (nil: slack stays): a
	// reconnection granted less moves the expiry nearer, and the slack with it.
	timeout func() time.Duration
	// holdTerm, holdKill: --max-hold's SIGTERM and SIGKILL (zero without a
	// limit); see holdStops.
	holdTerm, holdKill time.Time
	// notes tells the supervising loop what a timer did, after it did it.
	notes chan groupNote
	quit  chan struct{}

	mu       sync.Mutex
	heldTill time.Time   // the lease's loss deadline plus slack, while it held
	killAt   time.Time   // the armed SIGKILL; zero if none
	kill     *time.Timer // fires at killAt
	term     *time.Timer // --max-hold's SIGTERM
	limited  bool        // --max-hold's SIGTERM or SIGKILL was sent
	killed   bool        // a deadline's SIGKILL was sent
	fed      time.Time   // the bound the reaper was last told
	stopped  bool        // stop was called: no more signals
}

// groupNote is what a timer did to the group.
type groupNote int

const (
	noteHoldTerm groupNote = iota + 1 // --max-hold's SIGTERM was sent
	noteKilled                        // a deadline's SIGKILL was sent
)

// newGroupDeadline takes charge of the group of the started command: it
// starts the reaper, arms --max-hold's stops from the grant and feeds the
// reaper the lease's deadline until stop.
func (o *execOpts) newGroupDeadline(pgid int, lease *zklock.Lease) *groupDeadline {
	g := &groupDeadline{pgid: pgid, lease: lease, slack: o.grantedSession / 10, timeout: o.sessionTimeout,
		notes: make(chan groupNote, 4), quit: make(chan struct{})}
	g.heldTill = g.leaseBound(time.Now())
	if o.maxHold > 0 {
		term, kill := holdStops(o.maxHold, o.grace)
		g.holdTerm, g.holdKill = o.granted.Add(term), o.granted.Add(kill+holdKillLate())
	}
	g.reaper = startReaper(pgid, o.grace, g.slack)
	g.feed()
	if !g.holdTerm.IsZero() {
		g.term = time.AfterFunc(time.Until(g.holdTerm), g.limitTerm)
		g.killBy(g.holdKill)
	}
	go g.refresh(max(o.grantedSession/20, 10*time.Millisecond))
	return g
}

// leaseBound is the moment by which the group must be dead if nothing is
// heard from ZooKeeper until then; the zero time once the lease has ended.
func (g *groupDeadline) leaseBound(now time.Time) time.Time {
	if g.lease.Err() != nil {
		return time.Time{}
	}
	d := g.lease.Deadline()
	if d.IsZero() { // a lease with no loss clock: 0.4 of the session timeout, renewed while it holds
		return now.Add(4 * g.slack)
	}
	if !d.After(now) {
		return time.Time{} // ended meanwhile
	}
	return d.Add(g.slackNow())
}

// slackNow is the slack for the session's timeout now: a tenth of it, never
// more than at the grant. The library keeps a lost lease's node until the
// session may have expired, 0.2 of the smallest grant after the deadline.
func (g *groupDeadline) slackNow() time.Duration {
	if g.timeout == nil {
		return g.slack
	}
	return min(g.slack, g.timeout()/10)
}

// bound is the earliest of the moments the group must be dead by: the
// lease's (frozen at its last value once the lease ended), the hold
// limit's, and an armed SIGKILL's.
func (g *groupDeadline) bound() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.heldTill
	for _, t := range []time.Time{g.holdKill, g.killAt} {
		if !t.IsZero() && t.Before(b) {
			b = t
		}
	}
	return b
}

// refresh moves the lease's bound forward as the lease proves contact, and
// tells the reaper, until stop.
func (g *groupDeadline) refresh(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-g.quit:
			return
		case <-t.C:
		}
		if b := g.leaseBound(time.Now()); !b.IsZero() {
			g.mu.Lock()
			g.heldTill = b
			g.mu.Unlock()
		}
		g.feed()
	}
}

// feed tells the reaper the current bound, if it changed.
func (g *groupDeadline) feed() {
	b := g.bound()
	g.mu.Lock()
	changed := !b.Equal(g.fed)
	g.fed = b
	g.mu.Unlock()
	if changed {
		g.reaper.feed(b)
	}
}

// signal sends sig to the whole group, unless stop was called: the group
// is empty then, and without the reaper to keep it its id may be reused.
// While the reaper still starts (a loaded machine), a signal it could catch
// goes to the group's other members one by one: sent to the group, it
// killed the reaper before it ignored it, and zklock killed then left the
// command's leftovers running past the session (the torture's exec_kill).
func (g *groupDeadline) signal(sig syscall.Signal) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return
	}
	if sig != syscall.SIGKILL && !g.reaper.isReady() {
		if pids, ok := groupMembers(g.pgid); ok {
			for _, pid := range pids {
				if pid != g.reaper.pid() {
					_ = syscall.Kill(pid, sig)
				}
			}
			return
		}
	}
	_ = syscall.Kill(-g.pgid, sig)
}

// limitTerm is --max-hold's SIGTERM.
func (g *groupDeadline) limitTerm() {
	g.mu.Lock()
	g.limited = true // before the signal: the command's exit may be seen at once
	g.mu.Unlock()
	g.signal(syscall.SIGTERM)
	g.note(noteHoldTerm)
}

// killBy arms the group's SIGKILL at t, or at once if t has passed; a
// SIGKILL armed earlier stays. The reaper is told before this returns.
func (g *groupDeadline) killBy(t time.Time) {
	g.mu.Lock()
	if !g.killAt.IsZero() && !t.Before(g.killAt) {
		g.mu.Unlock()
		return
	}
	g.killAt = t
	if g.kill != nil {
		g.kill.Stop()
	}
	g.kill = time.AfterFunc(time.Until(t), g.killNow)
	g.mu.Unlock()
	g.feed()
}

// killAfter arms the SIGKILL grace from now, or sooner if the lock may end
// sooner: the hold limit's SIGKILL (armed from the start), and, once the
// lease has ended, its last bound (while it holds, the bound moves on as
// it proves contact, and the reaper keeps it). It returns the delay.
func (g *groupDeadline) killAfter(grace time.Duration) time.Duration {
	now := time.Now()
	t := now.Add(grace)
	if g.lease.Err() != nil {
		g.mu.Lock()
		t = minTime(t, g.heldTill)
		g.mu.Unlock()
	}
	g.killBy(t)
	g.mu.Lock()
	defer g.mu.Unlock()
	return max(g.killAt.Sub(now), 0)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// killNow sends SIGKILL to the group: a deadline has come.
func (g *groupDeadline) killNow() {
	g.mu.Lock()
	g.killed = true // before the signal: the command's exit may be seen at once
	if !g.holdKill.IsZero() && !time.Now().Before(g.holdKill) {
		g.limited = true
	}
	g.mu.Unlock()
	g.signal(syscall.SIGKILL)
	g.note(noteKilled)
}

func (g *groupDeadline) note(n groupNote) {
	select {
	case g.notes <- n:
	default: // the loop reads the state anyway
	}
}

// state reports whether --max-hold stopped the command and whether a
// deadline's SIGKILL was sent: by zklock's timers, or by the reaper, which
// keeps the same moments and may be first.
func (g *groupDeadline) state() (limited, killed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	due := func(t time.Time) bool { return !t.IsZero() && !now.Before(t) }
	return g.limited || due(g.holdTerm), g.killed || due(g.killAt)
}

// stop disarms the timers and stops the reaper, once the group is empty
// (or has been killed): the lock can then be released.
func (g *groupDeadline) stop() {
	close(g.quit)
	g.mu.Lock()
	g.stopped = true
	if g.term != nil {
		g.term.Stop()
	}
	if g.kill != nil {
		g.kill.Stop()
	}
	g.mu.Unlock()
	g.reaper.stop()
}

// othersAlive reports whether a process other than the reaper (and not a
// zombie) is left in the group. Where the system cannot list a group's
// members, the reaper is stopped first and the group is asked as a whole.
func (g *groupDeadline) othersAlive() bool {
	if members, ok := groupMembers(g.pgid); ok {
		for _, pid := range members {
			if pid != g.reaper.pid() {
				return true
			}
		}
		return false
	}
	g.reaper.stop()
	return syscall.Kill(-g.pgid, 0) == nil
}

// holdKillLateEnv makes --max-hold's own SIGKILL that much later, as a timer
// late on a loaded machine would be, for the test of the kill made when the
// library's limit ends the lease; not for users.
const holdKillLateEnv = "ZKLOCK_TEST_HOLD_KILL_LATE"

func holdKillLate() time.Duration {
	d, _ := time.ParseDuration(os.Getenv(holdKillLateEnv))
	return max(d, 0)
}
