package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zklock/zklock"
)

func ExampleRWMutex() {
	ctx := context.Background()
	client, err := zklock.Connect(ctx, servers)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	rw, err := client.NewRWMutex("/examples/catalog")
	if err != nil {
		fmt.Println(err)
		return
	}

	r1, _ := rw.AcquireRead(ctx)
	r2, err := rw.TryAcquireRead(ctx) // readers share
	fmt.Println(err)
	_, err = rw.TryAcquireWrite(ctx) // a writer waits for both
	fmt.Println(errors.Is(err, zklock.ErrLocked))
	_ = r1.Release(ctx)
	_ = r2.Release(ctx)
	w, err := rw.TryAcquireWrite(ctx)
	fmt.Println(err)
	_ = w.Release(ctx)
	// Output:
	// <nil>
	// true
	// <nil>
}

func ExampleRWMutex_Downgrade() {
	ctx := context.Background()
	client, err := zklock.Connect(ctx, servers)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	rw, err := client.NewRWMutex("/examples/catalog-rebuild")
	if err != nil {
		fmt.Println(err)
		return
	}

	w, err := rw.AcquireWrite(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	// ... rebuild the catalog alone, then keep reading it while others may
	// read too; no writer can slip in between.
	r, err := rw.Downgrade(ctx, w)
	fmt.Println(err, errors.Is(w.Err(), zklock.ErrReleased))
	other, err := rw.TryAcquireRead(ctx) // readers share with the downgraded one
	fmt.Println(err)
	_, err = rw.TryAcquireWrite(ctx) // a writer still waits
	fmt.Println(errors.Is(err, zklock.ErrLocked))
	_ = other.Release(ctx)
	_ = r.Release(ctx)
	// Output:
	// <nil> true
	// <nil>
	// true
}

func ExampleSemaphore() {
	ctx := context.Background()
	client, err := zklock.Connect(ctx, servers)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	encoders, err := client.NewSemaphore("/examples/encoders", 2) // at most 2 at once
	if err != nil {
		fmt.Println(err)
		return
	}

	a, _ := encoders.Acquire(ctx)
	b, _ := encoders.Acquire(ctx)
	_, err = encoders.TryAcquire(ctx)
	fmt.Println(errors.Is(err, zklock.ErrLocked))

	// Every client of the path must ask for the same N.
	other, _ := client.NewSemaphore("/examples/encoders", 3)
	_, err = other.TryAcquire(ctx)
	fmt.Println(errors.Is(err, zklock.ErrLimitMismatch))
	_ = a.Release(ctx)
	_ = b.Release(ctx)
	// Output:
	// true
	// true
}

func ExampleMultiLock() {
	ctx := context.Background()
	client, err := zklock.Connect(ctx, servers)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	// Taken in sorted order whatever the order given, so two clients never
	// deadlock; a peer that takes them in another order is yielded to.
	both, err := client.NewMultiLock("/examples/cache", "/examples/db")
	if err != nil {
		fmt.Println(err)
		return
	}
	lease, err := both.Acquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, part := range lease.Parts() { // each part's token fences its own resource
		tok, _ := part.Token(ctx)
		fmt.Println(tok > 0)
	}
	_ = lease.Release(ctx)
	// Output:
	// true
	// true
}

// A lease can be lost while its holder runs; Done says when, Err why.
func ExampleLease_Done() {
	ctx := context.Background()
	client, _ := zklock.Connect(ctx, servers)
	defer client.Close()
	mu, _ := client.NewMutex("/examples/lost")
	lease, _ := mu.Acquire(ctx)

	// An operator breaks the lock (zklock break --yes).
	_ = client.Conn().Delete(lease.Node(), -1)

	select {
	case <-lease.Done():
		fmt.Println(errors.Is(lease.Err(), zklock.ErrLockLost), zklock.LossCause(lease.Err()))
	case <-time.After(10 * time.Second):
		fmt.Println("still held")
	}
	fmt.Println(errors.Is(lease.Release(ctx), zklock.ErrLockLost)) // Release reports the loss once
	// Output:
	// true node_deleted
	// true
}

// An outage is not contention: ErrUnreachable, with the cause.
func ExampleErrUnreachable() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := zklock.Connect(ctx, []string{"127.0.0.1:1"}, zklock.WithConnectTimeout(300*time.Millisecond))
	fmt.Println(errors.Is(err, zklock.ErrUnreachable))
	// Output: true
}

// withLock runs fn while holding lock, whichever primitive it is.
func withLock(ctx context.Context, lock zklock.Locker, fn func()) error {
	lease, err := lock.Acquire(ctx)
	if err != nil {
		return err
	}
	defer lease.Release(ctx)
	fn()
	return nil
}

func ExampleLocker() {
	ctx := context.Background()
	client, err := zklock.Connect(ctx, servers)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	m, _ := client.NewMutex("/examples/locker/mutex")
	s, _ := client.NewSemaphore("/examples/locker/pool", 3)
	rw, _ := client.NewRWMutex("/examples/locker/catalog")

	for _, lock := range []zklock.Locker{m, s, rw.Writer()} {
		err := withLock(ctx, lock, func() { fmt.Println("working") })
		fmt.Println(err)
	}
	// Output:
	// working
	// <nil>
	// working
	// <nil>
	// working
	// <nil>
}
