package zklock_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
)

func mustElection(t testing.TB, c *zklock.Client, p string) *zklock.Election {
	t.Helper()
	e, err := c.NewElection(p)
	require.NoError(t, err)
	return e
}

// next reads the observer's next leader, or fails.
func next(t *testing.T, ch <-chan zklock.Leader) zklock.Leader {
	t.Helper()
	select {
	case ld, ok := <-ch:
		require.True(t, ok, "observer closed")
		return ld
	case <-time.After(10 * time.Second):
		t.Fatal("no leader change observed")
		return zklock.Leader{}
	}
}

// An election seen from outside: nobody, then the first campaigner with its
// value, owner and token, its proclaimed value, the second campaigner after
// the first resigns, and nobody again; the observer sees each change once,
// in that order.
func TestElectionLeaderObserveProclaimResign(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	watcher := mustElection(t, connect(t), p)
	_, err := watcher.Leader(ctxTimeout(t, 5*time.Second))
	require.ErrorIs(t, err, zklock.ErrNoLeader)
	changes := watcher.Observe(ctxTimeout(t, 60*time.Second))
	assert.Equal(t, zklock.Leader{}, next(t, changes), "nobody leads yet")

	a := mustElection(t, connect(t), p)
	la, err := a.Campaign(ctxTimeout(t, 10*time.Second), "10.0.0.1:8080")
	require.NoError(t, err)
	tokA := tokenOf(la.Lease())
	got := next(t, changes)
	assert.Equal(t, la.Lease().Node(), got.Node)
	assert.Equal(t, "10.0.0.1:8080", got.Value)
	assert.Equal(t, tokA, got.Token)
	assert.NotEmpty(t, got.Owner.Host)
	now, err := watcher.Leader(ctxTimeout(t, 5*time.Second))
	require.NoError(t, err)
	assert.Equal(t, got, now)

	b := mustElection(t, connect(t), p)
	won := make(chan *zklock.Leadership, 1)
	go func() {
		lb, err := b.Campaign(ctxTimeout(t, 20*time.Second), "10.0.0.2:8080")
		assert.NoError(t, err)
		won <- lb
	}()
	waitChildren(t, obs, p, 2)

	require.NoError(t, la.Proclaim(ctxTimeout(t, 5*time.Second), "10.0.0.1:9090"))
	got = next(t, changes)
	assert.Equal(t, la.Lease().Node(), got.Node, "proclaim keeps the leader")
	assert.Equal(t, "10.0.0.1:9090", got.Value)

	require.NoError(t, la.Resign(context.Background()))
	lb := <-won
	require.NotNil(t, lb)
	got = next(t, changes)
	assert.Equal(t, lb.Lease().Node(), got.Node)
	assert.Equal(t, "10.0.0.2:8080", got.Value)
	require.Error(t, la.Proclaim(ctxTimeout(t, 5*time.Second), "late"), "a resigned leader cannot proclaim")

	require.NoError(t, lb.Resign(context.Background()))
	assert.Equal(t, zklock.Leader{}, next(t, changes), "nobody leads again")
	select {
	case ld := <-changes:
		t.Fatalf("one change too many: %+v", ld)
	default:
	}
}

// The observer's channel is closed when its ctx ends, and at Close.
func TestElectionObserveEnds(t *testing.T) {
	t.Parallel()
	c := connect(t)
	e := mustElection(t, c, lockPath(t))
	ctx, cancel := context.WithCancel(context.Background())
	changes := e.Observe(ctx)
	next(t, changes)
	cancel()
	for range changes {
	}
	other := e.Observe(context.Background())
	next(t, other)
	c.Close()
	for range other {
	}
	_, ok := <-e.Observe(context.Background())
	assert.False(t, ok, "a closed client's observer is closed at once")
}

// What each election call costs the server, from its counters: Leader lists
// and reads (2 reads); an observer waiting holds exactly one watch; a
// proclaim is one write (the guarded multi) plus the leader's own-node watch
// reading its node again.
func TestElectionRequestCost(t *testing.T) {
	p := lockPath(t)
	e := mustElection(t, connect(t), p)
	ld, err := e.Campaign(ctxTimeout(t, 10*time.Second), "v1")
	require.NoError(t, err)
	tokenOf(ld.Lease())
	watcher := mustElection(t, connect(t), p)
	assert.Equal(t, cost{reads: 2}, costOf(t, func() {
		_, err := watcher.Leader(ctxTimeout(t, 5*time.Second))
		require.NoError(t, err)
	}), "Leader")

	watches := mntr(t).WatchCount()
	changes := watcher.Observe(ctxTimeout(t, 30*time.Second))
	next(t, changes)
	assert.Equal(t, watches+1, mntr(t).WatchCount(), "one watch per observer")

	assert.Equal(t, cost{writes: 1, reads: 3, events: 2}, costOf(t, func() {
		require.NoError(t, ld.Proclaim(ctxTimeout(t, 5*time.Second), "v2"))
		assert.Equal(t, "v2", next(t, changes).Value)
		eventually(t, "the leader watches its node again", func() bool { return mntr(t).WatchCount() == watches+1 })
	}), "Proclaim, observed: the multi; the leader's and the observer's watches fire; the leader re-reads, the observer lists and reads")
}

// A guarded write is one multi (one write); a revocation request one read
// of the holder's record and one write of it marked revoke, which fires the
// holder's own-node watch, and the holder reads its node again (one read).
func TestGuardRevokeRequestCost(t *testing.T) {
	p, obs, _, l := holding(t)
	tokenOf(l)
	node := dataNode(t, obs, p)
	assert.Equal(t, cost{writes: 1}, costOf(t, func() {
		_, err := l.Multi(ctxTimeout(t, 5*time.Second), &zk.SetDataRequest{Path: node, Data: []byte("x"), Version: -1})
		require.NoError(t, err)
	}), "Multi")
	watches := mntr(t).WatchCount()
	asker := connect(t)
	assert.Equal(t, cost{writes: 1, reads: 2, events: 1}, costOf(t, func() {
		require.NoError(t, asker.AskToRelease(ctxTimeout(t, 5*time.Second), l.Node()))
		<-l.RevokeRequested()
		eventually(t, "the holder watches its node again", func() bool { return mntr(t).WatchCount() == watches })
	}), "AskToRelease, heard")
}

// RunSingleton publishes its value: who runs the job, and where, is one
// Leader call on its path.
func TestRunSingletonPublishesItsValue(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	running := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- mustMutex(t, connect(t), p).RunSingleton(ctx, func(ctx context.Context) error {
			close(running)
			<-ctx.Done()
			return nil
		}, zklock.WithValue("cron@10.0.0.3"))
	}()
	<-running
	ld, err := mustElection(t, connect(t), p).Leader(ctxTimeout(t, 5*time.Second))
	require.NoError(t, err)
	assert.Equal(t, "cron@10.0.0.3", ld.Value)
	assert.NotZero(t, ld.Owner.PID)
	cancel()
	require.NoError(t, <-done, "fn returned while holding")
}

// Bad input to NewElection is refused without I/O.
func TestElectionBadPath(t *testing.T) {
	t.Parallel()
	_, err := connect(t).NewElection("leader/")
	require.ErrorIs(t, err, zklock.ErrInvalidPath)
}

// The time contract for the new calls, with ZooKeeper cut off: Leader and
// AskToRelease return ErrUnreachable within the session timeout, with
// context.Background(); Observe's channel still closes at once when its ctx
// ends.
func TestBoundLeadershipCallsWhenCutOff(t *testing.T) {
	t.Parallel()
	const session = 2 * time.Second
	c, proxy, l, p := stalledHolder(t, session)
	e := mustElection(t, c, p)
	changes := e.Observe(context.Background())
	next(t, changes)
	proxy.Stall()
	for name, call := range map[string]func() error{
		"Leader":       func() error { _, err := e.Leader(context.Background()); return err },
		"AskToRelease": func() error { return c.AskToRelease(context.Background(), l.Node()) },
	} {
		start := time.Now()
		err := call()
		took := time.Since(start)
		require.ErrorIs(t, err, zklock.ErrUnreachable, name)
		require.Less(t, took, session+boundSlack, name)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cut := e.Observe(ctx)
	cancel()
	start := time.Now()
	for range cut {
	}
	require.Less(t, time.Since(start), boundSlack, "Observe ends with its ctx")
	proxy.Resume()
}

// With LatchNames, campaigns queue as LeaderLatch nodes, in order; Leader
// and Observe read them; a mutex-named campaign (or a Mutex) refuses the
// path while latch nodes are there, and leaves no node behind.
func TestElectionLatchNames(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	a, err := connect(t).NewElection(p, zklock.LatchNames())
	require.NoError(t, err)
	la, err := a.Campaign(ctxTimeout(t, 10*time.Second), "a")
	require.NoError(t, err)
	assert.Regexp(t, `^_c_[0-9a-f]{32}-latch-0000000000$`, la.Lease().Node()[len(p)+1:])

	b, err := connect(t).NewElection(p, zklock.LatchNames())
	require.NoError(t, err)
	won := make(chan *zklock.Leadership, 1)
	go func() {
		lb, err := b.Campaign(ctxTimeout(t, 20*time.Second), "b")
		assert.NoError(t, err)
		won <- lb
	}()
	waitChildren(t, obs, p, 2)
	ld, err := b.Leader(ctxTimeout(t, 5*time.Second))
	require.NoError(t, err)
	assert.Equal(t, la.Lease().Node(), ld.Node)
	assert.Equal(t, "a", ld.Value)

	_, err = mustElection(t, connect(t), p).Campaign(ctxTimeout(t, 10*time.Second), "mutex-named")
	require.ErrorIs(t, err, zklock.ErrIncompatible)
	require.ErrorContains(t, err, "LeaderLatch")
	_, err = mustMutex(t, connect(t), p).Acquire(ctxTimeout(t, 10*time.Second))
	require.ErrorIs(t, err, zklock.ErrIncompatible)
	assert.Len(t, lockChildren(t, obs, p), 2, "the refused campaigns left no node")

	require.NoError(t, la.Resign(context.Background()))
	lb := <-won
	require.NotNil(t, lb)
	ld, err = a.Leader(ctxTimeout(t, 5*time.Second))
	require.NoError(t, err)
	assert.Equal(t, lb.Lease().Node(), ld.Node)
	require.NoError(t, lb.Resign(context.Background()))
}
