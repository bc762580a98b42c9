package zklocktest_test

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/goleak"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zklocktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// What the fake does not model fails plainly, and Lose and Expire of an
// ended lease do nothing.
func TestUnsupportedAndEnded(t *testing.T) {
	ctx := context.Background()
	srv := zklocktest.New()
	c := srv.NewClient()
	defer c.Close()
	e, err := c.NewElection("/e")
	if err != nil {
		t.Fatal(err)
	}
	ld, err := e.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := ld.Proclaim(ctx, "b"); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Proclaim = %v, want ErrUnsupported", err)
	}
	if _, err := ld.Lease().Multi(ctx); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Multi = %v, want ErrUnsupported", err)
	}
	if err := ld.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Lose(ld.Lease())
	srv.Expire(ld.Lease())
	if !errors.Is(ld.Err(), zklock.ErrReleased) {
		t.Fatalf("Err = %v after Lose of a released lease", ld.Err())
	}
	if _, err := c.NewMutex("/zookeeper/x"); !errors.Is(err, zklock.ErrInvalidPath) {
		t.Fatalf("NewMutex of a reserved path = %v", err)
	}
}

// A lease granted at the moment its Acquire's ctx ended is returned, never
// dropped: hammered with -race for the cancel-versus-grant window.
func TestCancelAgainstGrant(t *testing.T) {
	srv := zklocktest.New()
	m, _ := srv.NewClient().NewMutex("/l")
	for range 200 {
		h, err := m.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			if l, err := m.Acquire(ctx); err == nil {
				_ = l.Release(context.Background())
			}
		}()
		go cancel()
		_ = h.Release(context.Background())
		<-done
		if cs, _ := srv.NewClient().Contenders(context.Background(), "/l"); len(cs) != 0 {
			t.Fatalf("left behind: %+v", cs)
		}
	}
}
