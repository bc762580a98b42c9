package conformance

// The table's rows, one function for each condition a call is put in (the
// table itself: table.go).

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/zklock/zklock"
)

// rowList collects a condition's rows.
type rowList []row

// add appends the row name, whose run must describe want.
func (rs *rowList) add(name, want string, run func(t *testing.T, e *env) string) {
	*rs = append(*rs, row{name, run, want})
}

// invalidPathRows: refused before any I/O, the fake's queues untouched.
func invalidPathRows() []row {
	var rs rowList
	for _, p := range InvalidPaths {
		rs.add(fmt.Sprintf("Client.NewMutex/invalid path %q", p), "ErrInvalidPath", func(t *testing.T, e *env) string {
			_, err := e.c.Mutex(p)
			return describe(err, "")
		})
		rs.add(fmt.Sprintf("Client.NewElection/invalid path %q", p), "ErrInvalidPath", func(t *testing.T, e *env) string {
			_, err := e.c.Election(p)
			return describe(err, "")
		})
		rs.add(fmt.Sprintf("Client.Contenders/invalid path %q", p), "ErrInvalidPath; none", func(t *testing.T, e *env) string {
			cs, err := e.c.Contenders(context.Background(), p)
			return describe(err, "") + "; " + count(cs)
		})
	}
	return rs
}

// endedCtxRows: every call that takes a ctx returns ctx's error, even when
// it could answer at once, and changes nothing.
func endedCtxRows() []row {
	var rs rowList
	for _, end := range endings {
		w := end.want
		rs.add("Client.Contenders/"+end.name, w+"; none", func(t *testing.T, e *env) string {
			e.holder(t)
			cs, err := e.c.Contenders(end.ctx(), e.p)
			return describe(err, "") + "; " + count(cs)
		})
		rs.add("Mutex.Acquire/"+end.name, "acquire: "+w+"; left 0", func(t *testing.T, e *env) string {
			l, err := e.c.NewMutex(t, e.p).Acquire(end.ctx())
			return leaseOutcome(l, err, e.p) + "; " + e.left(t, 0)
		})
		rs.add("Mutex.TryAcquire/"+end.name, "try-acquire: "+w+"; left 0", func(t *testing.T, e *env) string {
			l, err := e.c.NewMutex(t, e.p).TryAcquire(end.ctx())
			return leaseOutcome(l, err, e.p) + "; " + e.left(t, 0)
		})
		rs.add("Election.Campaign/"+end.name, "campaign: "+w+"; left 0", func(t *testing.T, e *env) string {
			ld, err := e.c.NewElection(t, e.p).Campaign(end.ctx(), "v")
			return leadershipOutcome(ld, err, e.p) + "; " + e.left(t, 0)
		})
		rs.add("Election.Leader/"+end.name, w+"; no leader", func(t *testing.T, e *env) string {
			e.holder(t)
			ld, err := e.c.NewElection(t, e.p).Leader(end.ctx())
			return describe(err, "") + "; " + leaderOf(ld)
		})
		rs.add("Election.Observe/"+end.name, "closed without a value", func(t *testing.T, e *env) string {
			e.holder(t)
			return e.s.observed(e.c.NewElection(t, e.p).Observe(end.ctx()))
		})
		rs.add("Lease.Release/"+end.name, w+"; Err ErrReleased; again ErrNotHeld; left 0", func(t *testing.T, e *env) string {
			l := e.holder(t)
			err := l.Release(end.ctx())
			return describe(err, "") + "; " + e.after(t, l)
		})
		rs.add("Lease.Token/"+end.name, "token; Err nil", func(t *testing.T, e *env) string {
			l := e.holder(t)
			defer l.Release(context.Background())
			tok, err := l.Token(end.ctx())
			return tokenOutcome(tok, err) + "; Err " + describe(l.Err(), "")
		})
		rs.add("Leadership.Resign/"+end.name, w+"; Err ErrReleased; again ErrNotHeld; left 0", func(t *testing.T, e *env) string {
			ld := e.leading(t)
			err := ld.Resign(end.ctx())
			return describe(err, "") + "; " + e.after(t, ld.Lease())
		})
	}
	return rs
}

// closedClientRows: on a closed client every call returns ErrClosed (the
// constructors, which do no I/O, still build).
func closedClientRows() []row {
	var rs rowList
	closed := func(name, want string, run func(t *testing.T, e *env) string) {
		rs.add(name+"/closed client", want, func(t *testing.T, e *env) string {
			if err := e.c.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return run(t, e)
		})
	}
	closed("Client.Close", "nil", func(t *testing.T, e *env) string { return describe(e.c.Close(), "") })
	closed("Client.NewMutex", "nil", func(t *testing.T, e *env) string {
		_, err := e.c.Mutex(e.p)
		return describe(err, "")
	})
	closed("Client.NewElection", "nil", func(t *testing.T, e *env) string {
		_, err := e.c.Election(e.p)
		return describe(err, "")
	})
	closed("Client.Contenders", "ErrClosed; none", func(t *testing.T, e *env) string {
		cs, err := e.c.Contenders(context.Background(), e.p)
		return describe(err, "") + "; " + count(cs)
	})
	closed("Mutex.Acquire", "acquire: ErrClosed; left 0", func(t *testing.T, e *env) string {
		l, err := e.c.NewMutex(t, e.p).Acquire(context.Background())
		return leaseOutcome(l, err, e.p) + "; " + e.left(t, 0)
	})
	closed("Mutex.TryAcquire", "try-acquire: ErrClosed; left 0", func(t *testing.T, e *env) string {
		l, err := e.c.NewMutex(t, e.p).TryAcquire(context.Background())
		return leaseOutcome(l, err, e.p) + "; " + e.left(t, 0)
	})
	closed("Election.Campaign", "campaign: ErrClosed; left 0", func(t *testing.T, e *env) string {
		ld, err := e.c.NewElection(t, e.p).Campaign(context.Background(), "v")
		return leadershipOutcome(ld, err, e.p) + "; " + e.left(t, 0)
	})
	closed("Election.Leader", "ErrClosed; no leader", func(t *testing.T, e *env) string {
		ld, err := e.c.NewElection(t, e.p).Leader(context.Background())
		return describe(err, "") + "; " + leaderOf(ld)
	})
	closed("Election.Observe", "closed without a value", func(t *testing.T, e *env) string {
		return e.s.observed(e.c.NewElection(t, e.p).Observe(context.Background()))
	})
	return rs
}

// closedClientLeaseRows: the leases of a client that closes end with
// ErrClosed.
func closedClientLeaseRows() []row {
	var rs rowList
	rs.add("Lease.Release/closed client", "Err ErrClosed; ErrNotHeld; again ErrNotHeld; left 0", func(t *testing.T, e *env) string {
		l := e.holder(t)
		if err := e.c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		e.s.waitDone(t, l)
		errAfter := describe(l.Err(), "")
		first := describe(l.Release(context.Background()), "")
		again := describe(l.Release(context.Background()), "")
		return "Err " + errAfter + "; " + first + "; again " + again + "; " + e.left(t, 0)
	})
	rs.add("Lease.Token/closed client", "ErrClosed", func(t *testing.T, e *env) string {
		l := e.holder(t)
		if err := e.c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		e.s.waitDone(t, l)
		return tokenOutcome(l.Token(context.Background()))
	})
	rs.add("Leadership.Resign/closed client", "ErrNotHeld; Err ErrClosed", func(t *testing.T, e *env) string {
		ld := e.leading(t)
		if err := e.c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		e.s.waitDone(t, ld.Lease())
		return describe(ld.Resign(context.Background()), "") + "; Err " + describe(ld.Err(), "")
	})
	return rs
}

// releasedRows: a second release, by either door, and a release after a
// loss.
func releasedRows() []row {
	var rs rowList
	rs.add("Lease.Release/second release", "nil; Err ErrReleased; again ErrNotHeld; left 0", func(t *testing.T, e *env) string {
		l := e.holder(t)
		return describe(l.Release(context.Background()), "") + "; " + e.after(t, l)
	})
	rs.add("Leadership.Resign/second release", "nil; Err ErrReleased; again ErrNotHeld; left 0", func(t *testing.T, e *env) string {
		ld := e.leading(t)
		err := ld.Resign(context.Background())
		if again := ld.Resign(context.Background()); !errors.Is(again, zklock.ErrNotHeld) {
			return "second Resign " + describe(again, "")
		}
		return describe(err, "") + "; " + e.after(t, ld.Lease())
	})
	rs.add("Leadership.Resign/after its lease's Release", "ErrNotHeld; Err ErrReleased", func(t *testing.T, e *env) string {
		ld := e.leading(t)
		if err := ld.Lease().Release(context.Background()); err != nil {
			t.Fatalf("Release: %v", err)
		}
		return describe(ld.Resign(context.Background()), "") + "; Err " + describe(ld.Err(), "")
	})
	rs.add("Lease.Release/after a loss", "ErrLockLost; Err ErrLockLost; again ErrNotHeld; left 0", func(t *testing.T, e *env) string {
		l := e.holder(t)
		e.s.h.Lose(t, l)
		e.s.waitDone(t, l)
		return describe(l.Release(context.Background()), "") + "; " + e.after(t, l)
	})
	rs.add("Lease.Token/after Release", "ErrReleased", func(t *testing.T, e *env) string {
		l := e.holder(t)
		if err := l.Release(context.Background()); err != nil {
			t.Fatalf("Release: %v", err)
		}
		return tokenOutcome(l.Token(context.Background()))
	})
	return rs
}
