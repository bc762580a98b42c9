package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zklock/zklock"
)

// servers is where the examples find ZooKeeper; in a program it would be
// something like []string{"zk1:2181", "zk2:2181", "zk3:2181"}.
var servers []string

func Example() {
	ctx := context.Background()
	client, err := zklock.Connect(ctx, servers)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()

	mu, _ := client.NewMutex("/examples/nightly-report")
	lease, err := mu.Acquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("holding the lock")
	_ = lease.Release(ctx)
	// Output: holding the lock
}

func ExampleMutex_Acquire_timeout() {
	client, _ := zklock.Connect(context.Background(), servers)
	defer client.Close()
	mu, _ := client.NewMutex("/examples/timeout")
	held, _ := mu.Acquire(context.Background())

	// Someone holds the lock: wait at most 200ms. The queue node is gone
	// again when Acquire returns.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := mu.Acquire(ctx)
	fmt.Println(errors.Is(err, context.DeadlineExceeded))
	_ = held.Release(context.Background())
	// Output: true
}

func ExampleMutex_TryAcquire() {
	client, _ := zklock.Connect(context.Background(), servers)
	defer client.Close()
	mu, _ := client.NewMutex("/examples/try")

	first, _ := mu.TryAcquire(context.Background())
	_, err := mu.TryAcquire(context.Background())
	fmt.Println(errors.Is(err, zklock.ErrLocked))
	_ = first.Release(context.Background())
	// Output: true
}

func ExampleReentrantMutex() {
	ctx := context.Background()
	client, _ := zklock.Connect(ctx, servers)
	defer client.Close()
	mu, _ := client.NewReentrantMutex("/examples/reentrant")

	outer, _ := mu.Acquire(ctx)
	inner, _ := mu.Acquire(ctx) // the same goroutine re-enters: no request to ZooKeeper
	fmt.Println(outer == inner)
	_ = mu.Release(ctx) // still held
	_ = mu.Release(ctx) // now the node is deleted
	fmt.Println(errors.Is(outer.Err(), zklock.ErrReleased))

	// A named owner can release from another goroutine.
	job := zklock.ContextWithOwner(ctx, "job-7")
	_, _ = mu.Acquire(job)
	done := make(chan error)
	go func() { done <- mu.Release(job) }()
	fmt.Println(<-done)
	// Output:
	// true
	// true
	// <nil>
}

func ExampleMutex_Do() {
	client, _ := zklock.Connect(context.Background(), servers)
	defer client.Close()
	mu, _ := client.NewMutex("/examples/do")

	err := mu.Do(context.Background(), func(ctx context.Context) error {
		// ctx is cancelled the moment the lock is lost; its lease gives the
		// fencing token to hand to the resource, and Err to check last.
		lease := zklock.LeaseOf(ctx)
		token, _ := lease.Token(ctx)
		if lease.Err() == nil && token > 0 {
			fmt.Println("running alone")
		}
		return nil
	})
	fmt.Println(err)
	// Output:
	// running alone
	// <nil>
}

func ExampleMutex_RunSingleton() {
	client, _ := zklock.Connect(context.Background(), servers)
	defer client.Close()
	mu, _ := client.NewMutex("/examples/leader")

	ctx, stop := context.WithCancel(context.Background())
	err := mu.RunSingleton(ctx, func(ctx context.Context) error {
		// The leader-only loop: runs until ctx ends (shutdown or lost lock).
		fmt.Println("leading")
		stop()
		<-ctx.Done()
		return ctx.Err()
	})
	fmt.Println(errors.Is(err, context.Canceled))
	// Output:
	// leading
	// true
}

func ExampleLease_Token() {
	ctx := context.Background()
	client, _ := zklock.Connect(ctx, servers)
	defer client.Close()
	mu, _ := client.NewMutex("/examples/fencing")

	// The storage keeps the highest token it has seen and refuses older ones,
	// so a holder that lost the lock during a pause cannot write after the next.
	storage := &fencedStore{}
	first, _ := mu.Acquire(ctx)
	token, _ := first.Token(ctx)
	_ = first.Release(ctx)
	second, _ := mu.Acquire(ctx)
	newer, _ := second.Token(ctx)
	fmt.Println(storage.write(newer, "new holder"))
	fmt.Println(storage.write(token, "stale holder"))
	_ = second.Release(ctx)
	// Output:
	// <nil>
	// stale token
}

type fencedStore struct{ highest int64 }

func (s *fencedStore) write(token int64, _ string) error {
	if token < s.highest {
		return errors.New("stale token")
	}
	s.highest = token
	return nil
}

func ExampleJob_Run() {
	client, _ := zklock.Connect(context.Background(), servers)
	defer client.Close()
	// Every host runs this hourly; ZooKeeper's clock says which hour it is.
	job, _ := client.NewJob("/examples/hourly-report", time.Hour)

	_, err := job.Run(context.Background(), func(ctx context.Context) error {
		fmt.Println("report made")
		return nil
	})
	fmt.Println(err)
	run, err := job.Run(context.Background(), func(ctx context.Context) error {
		fmt.Println("never: this hour's report was made")
		return nil
	})
	fmt.Println(errors.Is(err, zklock.ErrRanThisPeriod), run.Outcome, run.Owner.Client == client.ID())
	// Output:
	// report made
	// <nil>
	// true succeeded true
}

func ExampleWithMaxHold() {
	client, _ := zklock.Connect(context.Background(), servers, zklock.WithMaxHold(100*time.Millisecond))
	defer client.Close()
	mu, _ := client.NewMutex("/examples/stuck")
	err := mu.Do(context.Background(), func(ctx context.Context) error {
		<-ctx.Done() // a job that would hang, ended by the limit
		return ctx.Err()
	})
	fmt.Println(errors.Is(err, zklock.ErrHoldLimit))
	// Output: true
}
