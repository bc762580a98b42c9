package zklocktest_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zklocktest"
)

// store is the user's resource: it refuses a write whose fencing token is
// older than one it has seen.
type store struct{ highest int64 }

func (s *store) write(token int64, v string) error {
	if token < s.highest {
		return fmt.Errorf("stale token %d (seen %d)", token, s.highest)
	}
	s.highest = token
	return nil
}

// worker is the user's code under test: it holds the lock, writes with its
// token until the lease ends, and reports why it stopped.
func worker(ctx context.Context, mu zklock.Locker, st *store, jobs <-chan string) error {
	lease, err := mu.Acquire(ctx)
	if err != nil {
		return err
	}
	defer lease.Release(context.Background())
	token, err := lease.Token(ctx)
	if err != nil {
		return err
	}
	for {
		select {
		case <-lease.Done():
			return lease.Err() // lost, or closed: stop writing
		case j := <-jobs:
			if err := lease.Err(); err != nil {
				return err
			}
			if err := st.write(token, j); err != nil {
				return err
			}
		}
	}
}

// A test of the worker, without ZooKeeper: it must stop when its lease is
// taken away, and the store must refuse the old holder's token once a new
// holder has written.
func Example() {
	ctx := context.Background()
	srv := zklocktest.New()
	client := srv.NewClient()
	defer client.Close()
	mu, _ := client.NewMutex("/locks/report")
	st := &store{}

	jobs := make(chan string)
	stopped := make(chan error, 1)
	go func() { stopped <- worker(ctx, mu, st, jobs) }()
	jobs <- "first" // the worker holds the lock and has written
	old, _ := srv.Holder("/locks/report").Token(ctx)

	other, _ := srv.NewClient().NewMutex("/locks/report")
	next := make(chan *zklock.Lease)
	go func() { lease, _ := other.Acquire(ctx); next <- lease }()

	srv.Lose(srv.Holder("/locks/report")) // as if an operator deleted the worker's node
	err := <-stopped
	fmt.Println("worker stopped on loss:", errors.Is(err, zklock.ErrLockLost))

	lease := <-next
	token, _ := lease.Token(ctx)
	fmt.Println("new holder's token is larger:", token > old)
	fmt.Println("new holder writes:", st.write(token, "second") == nil)
	fmt.Println("old token refused:", st.write(old, "late") != nil)
	_ = lease.Release(ctx)
	// Output:
	// worker stopped on loss: true
	// new holder's token is larger: true
	// new holder writes: true
	// old token refused: true
}
