//go:build linux

package zklock_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/zklock/zklock"
)

// This file holds TestTorture's ledger: every lease, hand deletion, pause and
// write of the run, stamped on one monotonic clock, and the invariants
// checked over them at the end.

// mono is a CLOCK_MONOTONIC reading in nanoseconds. TestTorture and its child
// process read the same clock, so their stamps compare directly.
type mono int64

const never = mono(math.MaxInt64)

// leaseRec is one holding of a lock path as the invariants see it: from
// Acquire's return (for Do and RunSingleton: fn's start) to the call of
// Release, fn's return, or the moment its end was seen.
type leaseRec struct {
	path    string
	node    string // full node path; "" for Do, which does not say
	owner   string // the explicit owner (ContextWithOwner), if the holder named one
	holder  string // for messages: "c3/w1 mutex", "child"
	start   mono
	planned mono            // when the holder means to let go
	done    <-chan struct{} // closes when the lease ends; nil for the child
	child   bool
	called  mono // child: when its Acquire was called
	shared  bool // a reader: it may overlap other readers
	limit   int  // a semaphore lease: up to limit may overlap
	// exec: a run of `zklock exec` (torture_exec_test.go), held from its
	// command's start to the last moment a process of the run was seen
	// alive
	exec bool

	// guarded by ledger.mu
	token   int64 // 0: not known (the read failed with the lease ending)
	end     mono  // 0 while held
	why     error // why it ended
	lost    bool  // it ended by a loss (ErrLockLost)
	atGrant bool  // its end was first seen by the next grant on the path
}

// handDeletion is a lock node the test deleted behind its owner's back.
// clean means the node was a waiter's while the holder ahead of it still
// meant to hold for a while, so no correct client can be granted on it.
type handDeletion struct {
	node, owner string
	at          mono
	clean       bool
}

type pauseSpan struct{ stop, cont mono }

// childWrite is the child checking Err() == nil while holding, then acting:
// the check ran between t0 and t1; the parent read the report at arrived.
type childWrite struct {
	path            string
	token           int64
	t0, t1, arrived mono
}

// errFnReturned ends a Do or RunSingleton lease when fn returns.
var errFnReturned = errors.New("fn returned")

type ledger struct {
	t0    mono          // start of the run, for readable times
	bound time.Duration // how far past its deadline a call may return

	mu         sync.Mutex
	leases     []*leaseRec
	open       map[string][]*leaseRec // in-process leases not yet seen ended, by path
	childOpen  map[string]*leaseRec   // the child's leases by node
	deletions  []handDeletion
	pauses     []pauseSpan
	outages    []pauseSpan // every server down: from the last stop to the first restart
	writes     []childWrite
	violations []string
	worst      time.Duration // worst overshoot of a deadline
	worstWhat  string
	timeline   []string // faults as they happened
}

func newLedger(bound time.Duration) *ledger {
	return &ledger{t0: monoNow(), bound: bound, open: map[string][]*leaseRec{}, childOpen: map[string]*leaseRec{}}
}

// at renders a stamp as the time since the run began.
func (lg *ledger) at(m mono) string {
	if m == never || m == 0 {
		return "never"
	}
	return time.Duration(m - lg.t0).Round(time.Microsecond).String()
}

// note adds a line to the timeline of faults.
func (lg *ledger) note(what string) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	lg.timeline = append(lg.timeline, lg.at(monoNow())+" "+what)
}

func (lg *ledger) granted() int {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	return len(lg.leases)
}

func (lg *ledger) violationCount() int {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	return len(lg.violations)
}

func (lg *ledger) violate(format string, args ...any) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	lg.violations = append(lg.violations, fmt.Sprintf(format, args...))
}

// grant records an in-process lease that was just granted. Any earlier lease
// on the path whose Done has closed ended before this moment (the channel
// closed before we looked), even if its watcher has not stamped it yet.
func (lg *ledger) grant(r *leaseRec) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	still := lg.open[r.path][:0]
	for _, o := range lg.open[r.path] {
		switch {
		case o.end != 0:
		case isClosed(o.done):
			o.end, o.atGrant = r.start, true
		default:
			still = append(still, o) // held across this grant: the final check reports it
		}
	}
	lg.open[r.path] = append(still, r)
	lg.leases = append(lg.leases, r)
}

func (lg *ledger) setToken(r *leaseRec, token int64) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	r.token = token
}

// ended stamps the end of a lease; the earliest stamp wins, and a loss is
// remembered whichever report carries it.
func (lg *ledger) ended(r *leaseRec, at mono, why error) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if r.end == 0 || at < r.end {
		r.end, r.atGrant = at, false
	}
	if errors.Is(why, zklock.ErrLockLost) {
		r.lost, r.why = true, why
	} else if r.why == nil {
		r.why = why
	}
}

func (lg *ledger) handDeleted(d handDeletion) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	lg.deletions = append(lg.deletions, d)
}

// holdsLong reports whether the open lease on node (or of owner, for a lease
// whose node is unknown) means to hold for at least left more.
func (lg *ledger) holdsLong(path, node, owner string, left time.Duration) bool {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	now := monoNow()
	if r := lg.childOpen[node]; r != nil {
		return r.planned-now >= mono(left) // it reports its end when it sees one
	}
	for _, r := range lg.open[path] {
		mine := r.node == node || (r.node == "" && owner != "" && r.owner == owner)
		if mine && r.end == 0 && !isClosed(r.done) && r.planned-now >= mono(left) {
			return true
		}
	}
	return false
}

// overshoot records how long after its deadline a call returned.
func (lg *ledger) overshoot(what string, d time.Duration) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if d > lg.worst {
		lg.worst, lg.worstWhat = d, what
	}
	if d > lg.bound {
		lg.violations = append(lg.violations, fmt.Sprintf("%s returned %v after its deadline (bound %v)", what, d.Round(time.Millisecond), lg.bound))
	}
}

func (lg *ledger) paused(p pauseSpan) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	lg.pauses = append(lg.pauses, p)
}

func (lg *ledger) outage(p pauseSpan) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	lg.outages = append(lg.outages, p)
}

// inOutage reports whether every server had been down for outageSettle at t.
func (lg *ledger) inOutage(t mono) bool {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	for _, p := range lg.outages {
		if p.stop+mono(outageSettle) <= t && t <= p.cont {
			return true
		}
	}
	return false
}

func (lg *ledger) childGrant(r *leaseRec) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	lg.leases = append(lg.leases, r)
	lg.childOpen[r.node] = r
}

func (lg *ledger) childEnd(node string, at mono, why error) {
	lg.mu.Lock()
	r := lg.childOpen[node]
	delete(lg.childOpen, node)
	lg.mu.Unlock()
	if r != nil {
		lg.ended(r, at, why)
	}
}

// childHolds reports whether the child has reported a grant and no end yet.
func (lg *ledger) childHolds() bool {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	return len(lg.childOpen) > 0
}

func (lg *ledger) childWrote(w childWrite) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	lg.writes = append(lg.writes, w)
}

// verdict is what the final check found.
type verdict struct {
	violations []string
	leases     int
	losses     int
	fenced     int           // child writes checked before a newer grant but read after it
	minMargin  time.Duration // smallest time from a detected loss to the next grant on its path
	margins    int           // losses followed by a grant
	marginWhat string
	timeline   []string
	worst      time.Duration // worst deadline overshoot
	worstWhat  string
}

// checker holds the indexes of one final check; the ledger's lock is held.
type checker struct {
	lg        *ledger
	v         *verdict
	byNode    map[string]handDeletion
	byOwner   map[string][]handDeletion
	byPath    map[string][]*leaseRec // sorted by start
	maxTok    map[string][]int64     // running maximum of the tokens in byPath order
	writesOf  map[writeKey][]childWrite
	childRecs map[writeKey]*leaseRec
}

type writeKey struct {
	path  string
	token int64
}

// check runs the invariants over the whole run. Call it once every lease has
// ended and the child has exited.
func (lg *ledger) check() verdict {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	v := verdict{violations: slices.Clone(lg.violations), leases: len(lg.leases), worst: lg.worst, worstWhat: lg.worstWhat,
		timeline: slices.Clone(lg.timeline)}
	c := lg.index(&v)
	for _, recs := range c.byPath {
		c.overlaps(recs)
		c.tokens(recs)
		c.lossMargins(recs)
	}
	c.writes()
	c.deletedGrants()
	c.deletedEnds()
	return v
}

func (lg *ledger) index(v *verdict) *checker {
	c := &checker{lg: lg, v: v, byNode: map[string]handDeletion{}, byOwner: map[string][]handDeletion{},
		byPath: map[string][]*leaseRec{}, maxTok: map[string][]int64{},
		writesOf: map[writeKey][]childWrite{}, childRecs: map[writeKey]*leaseRec{}}
	for _, d := range lg.deletions {
		c.byNode[d.node] = d
		if d.owner != "" {
			c.byOwner[d.owner] = append(c.byOwner[d.owner], d)
		}
	}
	for _, r := range lg.leases {
		c.byPath[r.path] = append(c.byPath[r.path], r)
		if r.child {
			c.childRecs[writeKey{r.path, r.token}] = r
		}
		if r.lost {
			v.losses++
		}
		if r.end == 0 {
			v.violations = append(v.violations, fmt.Sprintf("%s's lease on %s (node %s, granted at %s) never ended, even after Close", r.holder, r.path, r.node, lg.at(r.start)))
		}
	}
	for p, recs := range c.byPath {
		slices.SortStableFunc(recs, func(a, b *leaseRec) int { return int(a.start - b.start) })
		run := make([]int64, len(recs))
		var m int64
		for i, r := range recs {
			m = max(m, r.token)
			run[i] = m
		}
		c.maxTok[p] = run
	}
	for _, w := range lg.writes {
		k := writeKey{w.path, w.token}
		c.writesOf[k] = append(c.writesOf[k], w)
	}
	return c
}

func (c *checker) violate(format string, args ...any) {
	c.v.violations = append(c.v.violations, fmt.Sprintf(format, args...))
}

// deletion returns the hand deletion of r's node: by node, or for a lease
// whose node is unknown (Do), by its unique owner, if the deletion came while
// it held.
func (c *checker) deletion(r *leaseRec) (handDeletion, bool) {
	if r.node != "" {
		d, ok := c.byNode[r.node]
		return d, ok
	}
	for _, d := range c.byOwner[r.owner] {
		if d.at >= r.start {
			return d, true
		}
	}
	return handDeletion{}, false
}

// span is the stretch of time during which r counts as held:
//   - from its start to its end stamp;
//   - a lease whose node the test deleted by hand ends at the deletion: the
//     next waiter may be granted before the holder's own-node watch fires,
//     and that is the operator's doing. One granted on a node already deleted
//     spans nothing (the overlap sweep skips it; deletedGrants judges it);
//   - the child's lease, if the child was stopped (SIGSTOP) while holding,
//     ends at the last check Err() == nil that it completed before the stop: a
//     stopped process cannot act, and whatever it does after SIGCONT is judged
//     by the write rule (see writes);
//   - the child's lease whose Acquire call was interrupted by a stop counts
//     through the write rule only (ok false): its grant stamp tells when the
//     child resumed, not when it was granted.
func (c *checker) span(r *leaseRec) (from, to mono, ok bool) {
	from, to = r.start, r.end
	if to == 0 {
		to = never
	}
	if d, ok := c.deletion(r); ok {
		to = max(from, min(to, d.at))
	}
	if !r.child {
		return from, to, true
	}
	for _, p := range c.lg.pauses {
		if p.stop < r.start && p.cont > r.called {
			return 0, 0, false
		}
	}
	for _, p := range c.lg.pauses {
		if p.stop >= from && p.stop < to {
			return from, max(from, c.lastCheck(r, p.stop)), true
		}
	}
	return from, to, true
}

// lastCheck is the end of the child's last completed check on r before t.
func (c *checker) lastCheck(r *leaseRec, t mono) mono {
	var last mono
	for _, w := range c.writesOf[writeKey{r.path, r.token}] {
		if w.t1 < t && w.t1 > last {
			last = w.t1
		}
	}
	return last
}

// overlaps: no lease on a path is granted while an earlier one it excludes
// still holds: any lease for a mutex or a writer, a writer for a reader, and
// limit others for a semaphore lease.
func (c *checker) overlaps(recs []*leaseRec) {
	type held struct {
		r  *leaseRec
		to mono
	}
	var active []held
	for _, r := range recs {
		from, to, ok := c.span(r)
		if !ok {
			continue
		}
		if d, ok := c.deletion(r); ok && d.at <= r.start {
			continue // granted on a node already gone: see deletedGrants
		}
		active = slices.DeleteFunc(active, func(h held) bool { return h.to <= from })
		for _, h := range active {
			if excludes(r, h.r, len(active)) {
				c.violate("two holders on %s: %s (node %s, token %d) held from %s until %s (%v), and %s (node %s, token %d) was granted at %s (%d holding)",
					r.path, h.r.holder, h.r.node, h.r.token, c.lg.at(h.r.start), c.lg.at(h.to), h.r.why,
					r.holder, r.node, r.token, c.lg.at(from), len(active))
				break
			}
		}
		active = append(active, held{r, to})
	}
}

// excludes reports whether r may not be granted while h and n-1 others hold.
func excludes(r, h *leaseRec, n int) bool {
	switch {
	case r.limit > 0:
		return n >= r.limit
	case r.shared:
		return !h.shared
	}
	return true
}

// exclusive reports a lease that nobody shares: tokens and loss margins are
// measured on those.
func exclusive(r *leaseRec) bool { return !r.shared && r.limit == 0 }

// tokens: the fencing tokens of successive holders of a path strictly grow.
// A lease whose node was deleted by hand before it was granted is skipped: it
// ends as it begins, so its grant may be seen after the next one.
func (c *checker) tokens(recs []*leaseRec) {
	var last *leaseRec
	for _, r := range recs {
		if _, _, ok := c.span(r); !ok || r.token == 0 || !exclusive(r) {
			continue
		}
		if d, ok := c.deletion(r); ok && d.at <= r.start {
			continue
		}
		if last != nil && r.token <= last.token {
			c.violate("fencing token went backwards on %s: %s got %d at %s after %s got %d at %s",
				r.path, r.holder, r.token, c.lg.at(r.start), last.holder, last.token, c.lg.at(last.start))
			continue
		}
		last = r
	}
}

// lossMargins measures, for every loss a client detected by itself, how long
// before the next grant on the path it did so.
func (c *checker) lossMargins(recs []*leaseRec) {
	for _, r := range recs {
		if !r.lost || r.atGrant || r.end == 0 || !exclusive(r) {
			continue
		}
		if _, ok := c.deletion(r); ok {
			continue
		}
		if from, to, ok := c.span(r); !ok || to != r.end || from > to {
			continue // a paused child: its stamp is when it woke
		}
		i, _ := slices.BinarySearchFunc(recs, r.end, func(x *leaseRec, t mono) int { return int(x.start - t) })
		for ; i < len(recs) && recs[i] == r; i++ {
		}
		if i == len(recs) {
			continue
		}
		m := time.Duration(recs[i].start - r.end)
		if c.v.margins == 0 || m < c.v.minMargin {
			c.v.minMargin = m
			c.v.marginWhat = fmt.Sprintf("%s lost %s at %s (%v); %s granted at %s", r.holder, r.node, c.lg.at(r.end), r.why, recs[i].holder, c.lg.at(recs[i].start))
		}
		c.v.margins++
	}
}

// writes: the child must never act on a lease after a newer holder of the
// path was granted. A write whose check started after that grant is a
// violation (unless the test had deleted the child's node by hand by then);
// one whose check came before the grant but whose report arrived after it
// is a fenced write: what fencing tokens are for.
func (c *checker) writes() {
	for _, w := range c.lg.writes {
		g := c.firstNewer(w.path, w.token)
		if g == nil {
			continue
		}
		switch {
		case w.t0 > g.start && !c.childDeletedBy(w, g.start):
			c.violate("stale holder acted on %s: the child checked Err() == nil at %s holding token %d, after %s was granted token %d at %s",
				w.path, c.lg.at(w.t0), w.token, g.holder, g.token, c.lg.at(g.start))
		case w.arrived > g.start:
			c.v.fenced++
		}
	}
}

// firstNewer returns the earliest granted lease on path with a token above tok.
func (c *checker) firstNewer(path string, tok int64) *leaseRec {
	run := c.maxTok[path]
	i, _ := slices.BinarySearch(run, tok+1)
	if i == len(run) {
		return nil
	}
	return c.byPath[path][i]
}

func (c *checker) childDeletedBy(w childWrite, t mono) bool {
	r := c.childRecs[writeKey{w.path, w.token}]
	if r == nil {
		return false
	}
	d, ok := c.byNode[r.node]
	return ok && d.at <= t
}

// deletedGrants: no lease is granted on a waiter's node that the test had
// deleted while the holder ahead of it still held (lesson 16).
func (c *checker) deletedGrants() {
	for _, r := range c.lg.leases {
		d, ok := c.byNode[r.node]
		if r.node == "" || !ok || !d.clean || d.at >= r.start {
			continue
		}
		c.violate("%s was granted on %s at %s, a node deleted by hand at %s while it waited behind a holder",
			r.holder, r.node, c.lg.at(r.start), c.lg.at(d.at))
	}
}

// deletedEnds: a lease whose node the test deleted while it held ends (its
// Done closes, or its holder calls Release) within deletionBound: its
// own-node watch fires, or, cut off, its loss clock ends it. The overlap
// sweep ends such a lease at the deletion (the next waiter may be granted
// first, the operator's doing); this is the check that it does end, not
// hold on beside the next holder (row 1).
func (c *checker) deletedEnds() {
	for _, r := range c.lg.leases {
		d, ok := c.deletion(r)
		if r.child || r.exec || !ok || d.at < r.start || r.end == 0 {
			continue // an exec run ends when its processes die: SIGTERM, SIGKILL after --grace
		}
		late := time.Duration(r.end - d.at)
		if late <= deletionBound {
			continue
		}
		next := "nobody else was granted meanwhile"
		for _, o := range c.byPath[r.path] {
			if o != r && o.start > d.at && o.start < r.end {
				next = fmt.Sprintf("%s was granted at %s", o.holder, c.lg.at(o.start))
				break
			}
		}
		c.violate("%s's lease on %s (node %s) ended %v after the node was deleted by hand at %s (bound %v; %v); %s",
			r.holder, r.path, r.node, late.Round(time.Millisecond), c.lg.at(d.at), deletionBound, r.why, next)
	}
}
