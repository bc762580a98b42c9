package zklock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
)

func semAsync(t *testing.T, s *zklock.Semaphore, k int) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		l, err := s.AcquireN(ctxTimeout(t, 30*time.Second), k)
		ch <- acquired{l, err}
	}()
	return ch
}

func free(t *testing.T, s *zklock.Semaphore) int {
	t.Helper()
	n, err := s.Free(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	return n
}

// A request for 3 of 5 permits with 3 held waits with one lease only (no
// partial set), a request for 1 that comes after it queues behind it though
// a permit is free (no starvation of the 3), and once a holder leaves the 3
// are taken together, then the 1.
func TestSemaphoreThreeOfFive(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	leases, turnstile := p+"/leases", p+"/locks"
	var held []*zklock.Lease
	for range 3 {
		l, err := semOn(t, p, 5).Acquire(ctxTimeout(t, 10*time.Second))
		require.NoError(t, err)
		held = append(held, l)
	}
	probe := semOn(t, p, 5)
	assert.Equal(t, 2, free(t, probe))

	three := semAsync(t, semOn(t, p, 5), 3)
	waitChildren(t, obs, leases, 4) // its first lease, waiting for room for all 3
	one := semAsync(t, semOn(t, p, 5), 1)
	waitChildren(t, obs, turnstile, 2) // the 1 waits on the turnstile behind the 3
	_, err := probe.TryAcquire(ctxTimeout(t, 10*time.Second))
	require.ErrorIs(t, err, zklock.ErrLocked, "a permit is free, but a request waits ahead")
	_, err = probe.TryAcquireN(ctxTimeout(t, 10*time.Second), 2)
	require.ErrorIs(t, err, zklock.ErrLocked)
	notYet(t, three)
	notYet(t, one)
	assert.Len(t, lockChildren(t, obs, leases), 4, "the 3 holds no partial set while it waits")
	assert.Equal(t, 1, free(t, probe), "the waiting request's first lease counts")

	require.NoError(t, held[0].Release(context.Background()))
	l3 := got(t, three)
	require.Len(t, l3.Parts(), 3)
	require.NoError(t, l3.Err())
	waitChildren(t, obs, leases, 2+3+1) // the 1's lease queued behind the 3, waiting
	notYet(t, one)
	assert.Equal(t, 0, free(t, probe))
	var top int64
	for _, part := range l3.Parts() {
		top = max(top, tokenOf(part))
	}
	tok, err := l3.Token(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	assert.Equal(t, top, tok)

	require.NoError(t, held[1].Release(context.Background()))
	l1 := got(t, one)
	require.NoError(t, l3.Release(context.Background()))
	assert.Len(t, lockChildren(t, obs, leases), 2, "Release frees all 3")
	assert.Equal(t, 3, free(t, probe))
	require.NoError(t, l1.Release(context.Background()))
	require.NoError(t, held[2].Release(context.Background()))
	assert.Equal(t, 5, free(t, probe))
}

// A request for several permits that times out, or is cancelled, leaves no
// lease and no turnstile node; one that is refused at once (TryAcquireN)
// neither.
func TestSemaphoreAcquireNGivenUpLeavesNothing(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	h, err := semOn(t, p, 3).AcquireN(ctxTimeout(t, 10*time.Second), 2)
	require.NoError(t, err)
	_, err = semOn(t, p, 3).AcquireN(ctxTimeout(t, 300*time.Millisecond), 2)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Len(t, lockChildren(t, obs, p+"/leases"), 2)
	assert.Empty(t, lockChildren(t, obs, p+"/locks"))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := semOn(t, p, 3).AcquireN(ctx, 3)
		done <- err
	}()
	waitChildren(t, obs, p+"/leases", 3)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	assert.Len(t, lockChildren(t, obs, p+"/leases"), 2)
	assert.Empty(t, lockChildren(t, obs, p+"/locks"))

	_, err = semOn(t, p, 3).TryAcquireN(ctxTimeout(t, 10*time.Second), 2)
	require.ErrorIs(t, err, zklock.ErrLocked)
	l, err := semOn(t, p, 3).TryAcquireN(ctxTimeout(t, 10*time.Second), 1)
	require.NoError(t, err)
	require.NoError(t, l.Release(context.Background()))
	require.NoError(t, h.Release(context.Background()))
	assert.Empty(t, lockChildren(t, obs, p+"/leases"))
}

// A permit's node deleted by hand ends the whole lease; its Release reports
// the loss and frees the other permits.
func TestSemaphoreAcquireNLosesAsAWhole(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	l, err := semOn(t, p, 4).AcquireN(ctxTimeout(t, 10*time.Second), 3)
	require.NoError(t, err)
	tokenOf(l)
	require.NoError(t, obs.Delete(l.Parts()[1].Node(), -1))
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the loss of a permit went unnoticed")
	}
	require.ErrorIs(t, l.Err(), zklock.ErrLockLost)
	require.ErrorIs(t, l.Release(context.Background()), zklock.ErrLockLost)
	assert.Empty(t, lockChildren(t, obs, p+"/leases"))
}

func TestSemaphoreAcquireNRefusesBadCounts(t *testing.T) {
	t.Parallel()
	s := semOn(t, lockPath(t), 3)
	for _, k := range []int{0, -1, 4} {
		_, err := s.AcquireN(ctxTimeout(t, 10*time.Second), k)
		require.ErrorIs(t, err, zklock.ErrInvalidArgument, "k=%d", k)
		_, err = s.TryAcquireN(ctxTimeout(t, 10*time.Second), k)
		require.ErrorIs(t, err, zklock.ErrInvalidArgument, "k=%d", k)
	}
}

// What k permits cost, uncontended: the semaphore's limit read and path
// listing, the turnstile's create, listing and delete, and for each permit
// a create with its listing, its own-node read, and at Release its delete
// (its own-node watch fires).
func TestSemaphoreAcquireNCost(t *testing.T) {
	p := lockPath(t)
	s := semOn(t, p, 5)
	warm, err := s.Acquire(ctxTimeout(t, 10*time.Second)) // the path exists
	require.NoError(t, err)
	require.NoError(t, warm.Release(context.Background()))
	for _, k := range []int{1, 3} {
		spent := costOf(t, func() {
			l, err := s.AcquireN(ctxTimeout(t, 10*time.Second), k)
			require.NoError(t, err)
			tokenOf(l)
			require.NoError(t, l.Release(context.Background()))
		})
		assert.Equal(t, cost{writes: 2 + 2*int64(k), reads: 3 + 2*int64(k), events: int64(k)}, spent, "k=%d", k)
	}
}

// Two AcquireN(2) on N=2 whose first permits queue apart, the first caller's
// turnstile lost meanwhile (deleted by hand), so the second's first permit
// lands between the first's two: the first gives its permits back rather
// than wait behind a caller that waits for it, and both are served.
func TestAcquireNGivesBackWhenSomeoneCameInBetween(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	leases, turnstile := p+"/leases", p+"/locks"
	h, err := semOn(t, p, 2).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	a := make(chan acquired, 1)
	go func() { l, err := semOn(t, p, 2).AcquireN(ctxTimeout(t, 20*time.Second), 2); a <- acquired{l, err} }()
	waitChildren(t, obs, leases, 2)
	ts := waitChildren(t, obs, turnstile, 1)
	require.NoError(t, obs.Delete(turnstile+"/"+ts[0], -1)) // A's turnstile goes
	b := make(chan acquired, 1)
	go func() { l, err := semOn(t, p, 2).AcquireN(ctxTimeout(t, 20*time.Second), 2); b <- acquired{l, err} }()
	waitChildren(t, obs, leases, 3) // h, A's first, B's first
	require.NoError(t, h.Release(context.Background()))
	for range 2 {
		var r acquired
		select {
		case r = <-a:
		case r = <-b:
		case <-time.After(15 * time.Second):
			t.Fatalf("a wait cycle: leases %v", lockChildren(t, obs, leases))
		}
		require.NoError(t, r.err)
		require.Len(t, r.l.Parts(), 2)
		require.NoError(t, r.l.Release(context.Background()))
	}
}
