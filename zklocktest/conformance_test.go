package zklocktest_test

import (
	"context"
	"testing"
	"time"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zklocktest"
	"github.com/zklock/zklock/zklocktest/conformance"
)

// fakeClient adapts a zklocktest Client to the suite.
type fakeClient struct{ c *zklocktest.Client }

func (f fakeClient) NewMutex(t *testing.T, path string) zklock.Locker {
	m, err := f.c.NewMutex(path)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (f fakeClient) NewElection(t *testing.T, path string) conformance.Election {
	e, err := f.c.NewElection(path)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (f fakeClient) Mutex(path string) (zklock.Locker, error) {
	m, err := f.c.NewMutex(path)
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (f fakeClient) Election(path string) (conformance.Election, error) {
	e, err := f.c.NewElection(path)
	if err != nil {
		return nil, err
	}
	return e, nil
}

func (f fakeClient) Contenders(ctx context.Context, path string) ([]zklock.Contender, error) {
	return f.c.Contenders(ctx, path)
}

func (f fakeClient) Close() error { return f.c.Close() }

// TestConformance runs the suite that the root package runs against real
// ZooKeeper (TestConformanceZooKeeper) against the fake.
func TestConformance(t *testing.T) {
	srv := zklocktest.New()
	conformance.Run(t, conformance.Harness{
		NewClient: func(t *testing.T) conformance.Client {
			c := srv.NewClient()
			t.Cleanup(func() { c.Close() })
			return fakeClient{c}
		},
		Lose:   func(_ *testing.T, l *zklock.Lease) { srv.Lose(l) },
		Expire: func(_ *testing.T, _ conformance.Client, l *zklock.Lease) { srv.Expire(l) },
		Wait:   5 * time.Second,
		GiveUp: 10 * time.Millisecond,
	})
}
