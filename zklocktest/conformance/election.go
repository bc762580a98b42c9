package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zklock/zklock"
)

// campaignAsync starts a Campaign and returns where its lease will arrive.
func campaignAsync(e Election, value string) <-chan result {
	out := make(chan result, 1)
	go func() {
		ld, err := e.Campaign(context.Background(), value)
		if err != nil {
			out <- result{nil, err}
			return
		}
		out <- result{ld.Lease(), nil}
	}()
	return out
}

// leaderIs requires Leader to report l's node with value and l's token.
func leaderIs(t *testing.T, e Election, l *zklock.Lease, value string) {
	t.Helper()
	ld, err := e.Leader(context.Background())
	if err != nil || ld.Node != l.Node() || ld.Value != value || ld.Token != token(t, l) {
		t.Fatalf("Leader = %+v, %v; want %s, %q, token %d", ld, err, l.Node(), value, token(t, l))
	}
}

// election: Leader, Campaign in turn, Resign, a lost leadership.
func (s *suite) election(t *testing.T) {
	p := s.path(t)
	c1, c2 := s.h.NewClient(t), s.h.NewClient(t)
	e1, e2 := c1.NewElection(t, p), c2.NewElection(t, p)
	if _, err := e1.Leader(context.Background()); !errors.Is(err, zklock.ErrNoLeader) {
		t.Fatalf("Leader of an empty election = %v, want ErrNoLeader", err)
	}
	ld1, err := e1.Campaign(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	leaderIs(t, e2, ld1.Lease(), "a")
	second := campaignAsync(e2, "b")
	s.waitContenders(t, c1, p, 2)
	pending(t, second, "the second campaign")
	t1 := token(t, ld1.Lease()) // a token is a holder's: read it while held
	if err := ld1.Resign(context.Background()); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	select {
	case <-ld1.Done():
	case <-time.After(s.h.Wait):
		t.Fatal("Done not closed after Resign")
	}
	if !errors.Is(ld1.Err(), zklock.ErrReleased) {
		t.Fatalf("Err after Resign = %v", ld1.Err())
	}
	l2 := s.granted(t, second, "the second campaign")
	leaderIs(t, e1, l2, "b")
	if token(t, l2) <= t1 {
		t.Fatal("the next leader's token is not larger")
	}
	s.h.Lose(t, l2)
	s.ended(t, l2, zklock.ErrLockLost, "lost leadership")
	s.waitContenders(t, c1, p, 0)
	if _, err := e1.Leader(context.Background()); !errors.Is(err, zklock.ErrNoLeader) {
		t.Fatalf("Leader after the loss = %v, want ErrNoLeader", err)
	}
}

// observe: the leader now (zero: nobody), then every change, then the
// channel closes with ctx.
func (s *suite) observe(t *testing.T) {
	p := s.path(t)
	c1, c2 := s.h.NewClient(t), s.h.NewClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	obs := c2.NewElection(t, p).Observe(ctx)
	s.sees(t, obs, "", "nobody leads")
	e := c1.NewElection(t, p)
	ld, err := e.Campaign(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	s.sees(t, obs, ld.Lease().Node(), "the first leader")
	second := campaignAsync(s.h.NewClient(t).NewElection(t, p), "b")
	s.waitContenders(t, c1, p, 2)
	if err := ld.Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
	l2 := s.granted(t, second, "the second campaign")
	s.sees(t, obs, l2.Node(), "the second leader")
	if err := l2.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.sees(t, obs, "", "nobody leads after the last resigned")
	cancel()
	for range obs { // drained until closed
	}
}

// sees reads obs until it reports node as the leader ("": nobody).
func (s *suite) sees(t *testing.T, obs <-chan zklock.Leader, node, what string) {
	t.Helper()
	timeout := time.After(s.h.Wait)
	for {
		select {
		case ld, ok := <-obs:
			if !ok {
				t.Fatalf("Observe closed before %s", what)
			}
			if ld.Node == node {
				return
			}
		case <-timeout:
			t.Fatalf("Observe never reported %s", what)
		}
	}
}
