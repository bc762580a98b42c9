package zklock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// cost is what the server counted for a stretch of work.
type cost struct{ writes, reads, events int64 }

func costOf(t *testing.T, fn func()) cost {
	t.Helper()
	before := mntr(t)
	fn()
	after := mntr(t)
	return cost{
		writes: after.Int("zk_cnt_updatelatency") - before.Int("zk_cnt_updatelatency"),
		reads:  after.Int("zk_cnt_readlatency") - before.Int("zk_cnt_readlatency"),
		events: zktest.WatchEventsFired(before, after),
	}
}

// acquireFn is one primitive's Acquire on a fresh path.
type acquireFn func(t *testing.T, c *zklock.Client, p string) func(context.Context) (*zklock.Lease, error)

var primitives = []struct {
	name    string
	acquire acquireFn
	cycle   cost  // one uncontended acquire + release, once the path exists
	handOff cost  // the holder's release and the next one's grant, with that one waiting
	watches int64 // watches a waiter sets before the hand-off
}{
	// A cycle, the client having taken the path at once twice before: the create
	// and the listing sent together, the listing setting a child watch that
	// stands in for the own-node watch (listwatch.go; the token comes off
	// the create's reply), the delete, which fires that watch. (Other
	// primitives read their node, setting its watch, as a Mutex does on a
	// path not taken at once before.) A hand-off: the holder's delete,
	// its own-node watch and the waiter's watch firing, and nothing else:
	// the waiter read its own node while it queued, with its watch on the
	// holder's node, and the order of events proves that node survived.
	{"mutex", func(t *testing.T, c *zklock.Client, p string) func(context.Context) (*zklock.Lease, error) {
		return mustMutex(t, c, p).Acquire
	}, cost{2, 1, 1}, cost{1, 0, 2}, 2},
	{"read", func(t *testing.T, c *zklock.Client, p string) func(context.Context) (*zklock.Lease, error) {
		rw, err := c.NewRWMutex(p)
		require.NoError(t, err)
		return rw.AcquireRead
	}, cost{2, 2, 1}, cost{}, 0},
	// The semaphore also reads the stored limit, lists its path with that
	// read (the recipe check: kazoo's leases would live there), and passes through its
	// turnstile mutex (create and listing, delete: a turnstile is held for a
	// moment and has no own-node watch). At a hand-off the waiter holds the
	// turnstile and watches the leases' list: it lists again, reads its
	// lease (its own-node watch), and deletes the turnstile.
	// A writer behind a writer named as Curator's lists before it holds: that
	// writer may be Curator's, which downgrades by making a reader at its own
	// place (see internal/lockpath's mayJoinAhead). kazoo's writer does not downgrade.
	{"write", func(t *testing.T, c *zklock.Client, p string) func(context.Context) (*zklock.Lease, error) {
		rw, err := c.NewRWMutex(p)
		require.NoError(t, err)
		return rw.AcquireWrite
	}, cost{2, 2, 1}, cost{1, 1, 2}, 2},
	{"write-kazoo", func(t *testing.T, c *zklock.Client, p string) func(context.Context) (*zklock.Lease, error) {
		rw, err := c.NewRWMutex(p, zklock.KazooNames())
		require.NoError(t, err)
		return rw.AcquireWrite
	}, cost{2, 2, 1}, cost{1, 0, 2}, 2},
	{"semaphore", func(t *testing.T, c *zklock.Client, p string) func(context.Context) (*zklock.Lease, error) {
		s, err := c.NewSemaphore(p, 1)
		require.NoError(t, err)
		return s.Acquire
	}, cost{4, 5, 1}, cost{2, 2, 2}, 1},
	// An election with LeaderLatch names is a mutex under other names.
	{"latch", func(t *testing.T, c *zklock.Client, p string) func(context.Context) (*zklock.Lease, error) {
		e, err := c.NewElection(p, zklock.LatchNames())
		require.NoError(t, err)
		return func(ctx context.Context) (*zklock.Lease, error) {
			ld, err := e.Campaign(ctx, "v")
			if err != nil {
				return nil, err
			}
			return ld.Lease(), nil
		}
	}, cost{2, 2, 1}, cost{1, 0, 2}, 2},
	// Two mutexes. At a hand-off the waiter waited on the first path (its
	// own-node read done while it queued) and takes the second afresh.
	{"multi-2", func(t *testing.T, c *zklock.Client, p string) func(context.Context) (*zklock.Lease, error) {
		ml, err := c.NewMultiLock(p+"/x", p+"/y")
		require.NoError(t, err)
		return ml.Acquire
	}, cost{4, 4, 2}, cost{3, 2, 3}, 2},
}

// TestRequestCostPerPrimitive: the exact request cost, from the server's
// counters, of each primitive's uncontended acquire+release cycle (the path
// already exists) and of a hand-off (the holder's release until the waiter
// behind it holds, its own-node read included). A reader never waits for
// another reader, so it has no hand-off of its own (a writer's release to
// readers is in TestRWMutexReleaseWakesExactlyWhomItFrees).
func TestRequestCostPerPrimitive(t *testing.T) {
	for _, pr := range primitives {
		t.Run(pr.name, func(t *testing.T) {
			p := lockPath(t)
			c := connect(t, zklock.WithCleanupDelay(0), quietSession)
			acquire := pr.acquire(t, c, p)
			cycle := func() {
				l, err := acquire(ctxTimeout(t, 10*time.Second))
				require.NoError(t, err)
				tokenOf(l) // the own-node read is done
				require.NoError(t, l.Release(context.Background()))
			}
			cycle() // the path exists from now on
			cycle() // and a Mutex expects to hold at once (listwatch.go)
			assert.Equal(t, pr.cycle, costOf(t, cycle), "acquire + release")
			if pr.handOff == (cost{}) {
				return
			}
			holder, err := acquire(ctxTimeout(t, 10*time.Second))
			require.NoError(t, err)
			tokenOf(holder)
			watches := mntr(t).WatchCount() // the holder's own-node watches
			waiter := make(chan *zklock.Lease, 1)
			other := pr.acquire(t, connect(t, zklock.WithCleanupDelay(0), quietSession), p)
			go func() {
				l, err := other(ctxTimeout(t, 20*time.Second))
				assert.NoError(t, err)
				if err == nil {
					tokenOf(l)
				}
				waiter <- l
			}()
			eventually(t, "the waiter watches", func() bool { return mntr(t).WatchCount() >= watches+pr.watches })
			got := costOf(t, func() {
				require.NoError(t, holder.Release(context.Background()))
				l := <-waiter
				require.NotNil(t, l)
				t.Cleanup(func() { _ = l.Release(context.Background()) })
			})
			assert.Equal(t, pr.handOff, got, "hand-off")
		})
	}
}
