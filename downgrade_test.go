package zklock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// curatorRW makes Curator's InterProcessReadWriteLock nodes, name for name,
// on a raw connection of its own, and follows Curator's predicates: a writer
// holds when it sorts first, a reader when no writer sorts ahead of it;
// each watches the first node that blocks it (a writer: the one just ahead;
// a reader: the first writer) and lists again when that changes. Curator
// sorts by the 10 digits that end a name, keeping the listing's order among
// equal ones.
type curatorRW struct {
	conn *zk.Conn
	node string
	held chan struct{}
	err  chan error
}

func curatorWaiter(t *testing.T, p string, write bool) *curatorRW {
	t.Helper()
	marker := "__READ__"
	if write {
		marker = "__WRIT__"
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	cw := &curatorRW{conn: observer(t), held: make(chan struct{}), err: make(chan error, 1)}
	node, err := cw.conn.Create(p+"/_c_"+hex.EncodeToString(b)+"-"+marker, nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	cw.node = node
	go func() { cw.err <- cw.wait(p, write) }()
	return cw
}

func (cw *curatorRW) wait(p string, write bool) error {
	mine := path.Base(cw.node)
	for {
		children, _, err := cw.conn.Children(p)
		if err != nil {
			return err
		}
		slices.SortStableFunc(children, func(a, b string) int { return strings.Compare(a[len(a)-10:], b[len(b)-10:]) })
		idx := slices.Index(children, mine)
		if idx < 0 {
			return errors.New("curator waiter: node gone")
		}
		block := ""
		for i, n := range children[:idx] {
			if write && i == idx-1 || !write && strings.Contains(n, "__WRIT__") {
				block = n
				break
			}
		}
		if block == "" {
			close(cw.held)
			return nil
		}
		_, _, ch, err := cw.conn.GetW(p + "/" + block)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return err
		}
		<-ch
	}
}

func (cw *curatorRW) holds() bool {
	select {
	case <-cw.held:
		return true
	default:
		return false
	}
}

func (cw *curatorRW) release(t *testing.T) {
	t.Helper()
	require.NoError(t, cw.conn.Delete(cw.node, -1))
}

// waiter is one contender queued behind the writer that downgrades: zklock's
// or Curator's, a reader or a writer.
type waiter struct {
	write bool
	zk    <-chan acquired // zklock's
	lease *zklock.Lease
	cur   *curatorRW // Curator's
}

func (w *waiter) holds(t *testing.T) bool {
	t.Helper()
	if w.cur != nil {
		return w.cur.holds()
	}
	if w.lease == nil {
		select {
		case a := <-w.zk:
			require.NoError(t, a.err)
			w.lease = a.l
		default:
		}
	}
	return w.lease != nil
}

func (w *waiter) waitHeld(t *testing.T) {
	t.Helper()
	if w.cur != nil {
		select {
		case <-w.cur.held:
		case err := <-w.cur.err:
			require.NoError(t, err, "curator waiter")
			require.True(t, w.cur.holds())
		case <-time.After(20 * time.Second):
			t.Fatal("curator waiter not granted")
		}
		return
	}
	if w.lease == nil {
		w.lease = got(t, w.zk)
	}
}

func (w *waiter) release(t *testing.T) {
	t.Helper()
	if w.cur != nil {
		w.cur.release(t)
		return
	}
	require.NoError(t, w.lease.Release(context.Background()))
}

// A writer downgrades with waiters of both libraries queued behind it, in
// both libraries' orders: the readers right behind it get in at once, beside
// its reader; a writer behind, zklock's or Curator's, waits for every reader,
// and then the rest are served in order, never a reader beside a writer.
// queue spells the waiters: z or c (zklock's, Curator's), then r or w.
func TestRWMutexDowngradeWithWaitersOfBothLibraries(t *testing.T) {
	for _, queue := range []string{"zw cw zr", "cw zw cr", "zr cr zw cw zr", "cr zr cw zw cr"} {
		t.Run(strings.ReplaceAll(queue, " ", "-"), func(t *testing.T) {
			p := lockPath(t)
			obs := observer(t)
			rw := rwOn(t, p)
			w, err := rw.AcquireWrite(ctxTimeout(t, 10*time.Second))
			require.NoError(t, err)
			wtok := tokenOf(w)
			base := mntr(t).WatchCount()
			var waiters []*waiter
			watches := int64(0)
			for i, spec := range strings.Fields(queue) {
				wt := &waiter{write: spec[1] == 'w'}
				if spec[0] == 'z' {
					wt.zk = rwAsync(t, rwOn(t, p), wt.write)
					watches += 2 // the node it waits for, its own node
				} else {
					wt.cur = curatorWaiter(t, p, wt.write)
					watches++
				}
				waiters = append(waiters, wt)
				waitChildren(t, obs, p, i+2)
			}
			eventually(t, "every waiter watches", func() bool { return mntr(t).WatchCount() >= base+watches })
			for _, wt := range waiters {
				require.False(t, wt.holds(t))
			}

			r, err := rw.Downgrade(ctxTimeout(t, 10*time.Second), w)
			require.NoError(t, err)
			require.ErrorIs(t, w.Err(), zklock.ErrReleased)
			require.ErrorIs(t, w.Release(context.Background()), zklock.ErrNotHeld)
			require.NoError(t, r.Err())
			assert.Contains(t, r.Node(), "__READ__")
			assert.Equal(t, w.Sequence(), r.Sequence())
			assert.Equal(t, w.Node()[len(w.Node())-10:], r.Node()[len(r.Node())-10:], "the reader sorts at the writer's place")
			assert.Equal(t, wtok, tokenOf(r), "the reader keeps the writer's token: it takes its place")
			ok, _, err := obs.Exists(w.Node())
			require.NoError(t, err)
			assert.False(t, ok, "the writer's node is gone")

			// The readers right behind get in; the first writer does not.
			first := slices.IndexFunc(waiters, func(w *waiter) bool { return w.write })
			for _, wt := range waiters[:first] {
				wt.waitHeld(t)
			}
			if first == 0 {
				eventually(t, "the writer behind watches the reader", func() bool { return watchersOf(t, r.Node()) >= 2 })
			}
			for _, wt := range waiters[first:] {
				require.False(t, wt.holds(t), "a writer, or one behind it, holds beside the downgraded reader")
			}
			require.NoError(t, r.Release(context.Background()))
			for _, wt := range waiters[:first] {
				wt.release(t)
			}
			// Then one by one: a writer alone, then the readers behind it.
			for i := first; i < len(waiters); i++ {
				waiters[i].waitHeld(t)
				if l := waiters[i].lease; l != nil {
					assert.Greater(t, tokenOf(l), wtok, "a later holder's token is larger than the downgraded reader's")
				}
				for _, later := range waiters[i+1:] {
					require.False(t, later.holds(t), "%s granted beside %d", queue, i)
				}
				waiters[i].release(t)
			}
			waitChildren(t, obs, p, 0)
		})
	}
}

// The writer queued behind a writer that downgrades gets a larger token
// than the downgraded reader, though its node is older than the reader's:
// the reader keeps the writer's token (issue 39; before, "writer 4800,
// downgraded reader 4803, next writer 4802").
func TestRWMutexDowngradedReaderKeepsTheWritersToken(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	rw := rwOn(t, p)
	w1, err := rw.AcquireWrite(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	w2 := rwAsync(t, rwOn(t, p), true)
	waitChildren(t, obs, p, 2)

	tw1 := tokenOf(w1) // a token is a holder's: read it while the writer holds
	r, err := rw.Downgrade(ctxTimeout(t, 10*time.Second), w1)
	require.NoError(t, err)
	tr := tokenOf(r)
	_, stat, err := obs.Get(r.Node())
	require.NoError(t, err)
	require.NoError(t, r.Release(context.Background()))
	l2 := got(t, w2)
	tw2 := tokenOf(l2)
	t.Logf("tokens: writer %d, downgraded reader %d (its node's czxid %d), next writer %d", tw1, tr, stat.Czxid, tw2)
	assert.Equal(t, tw1, tr, "the downgraded reader keeps the writer's token")
	assert.Less(t, tr, tw2, "the next writer's token is larger than the downgraded reader's")
	assert.Greater(t, stat.Czxid, tw2, "the reader's node is younger than the next writer's: its czxid would not do")
	require.NoError(t, l2.Release(context.Background()))
}

// A downgrade costs the transaction that makes the reader, the writer's
// delete, and the reader's own-node read; the writer's own-node watch fires.
func TestRWMutexDowngradeCost(t *testing.T) {
	p := lockPath(t)
	rw := rwOn(t, p)
	w, err := rw.AcquireWrite(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	tokenOf(w)
	var r *zklock.Lease
	spent := costOf(t, func() {
		r, err = rw.Downgrade(ctxTimeout(t, 10*time.Second), w)
		require.NoError(t, err)
		tokenOf(r)
	})
	assert.Equal(t, cost{writes: 2, reads: 1, events: 1}, spent)
	require.NoError(t, r.Release(context.Background()))
}

// Only a write lease of this RWMutex with Curator's names downgrades; the
// others are refused, and nothing changes.
func TestRWMutexDowngradeRefusals(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	c := connect(t)
	rw, err := c.NewRWMutex(p)
	require.NoError(t, err)
	r, err := rw.AcquireRead(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	_, err = rw.Downgrade(ctxTimeout(t, 10*time.Second), r)
	require.ErrorIs(t, err, zklock.ErrInvalidArgument)
	_, err = rw.Downgrade(ctxTimeout(t, 10*time.Second), nil)
	require.ErrorIs(t, err, zklock.ErrInvalidArgument)
	require.NoError(t, r.Release(context.Background()))

	kz, err := c.NewRWMutex(p, zklock.KazooNames())
	require.NoError(t, err)
	kw, err := kz.AcquireWrite(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	_, err = kz.Downgrade(ctxTimeout(t, 10*time.Second), kw)
	require.ErrorIs(t, err, zklock.ErrInvalidArgument)
	require.ErrorContains(t, err, "kazoo")
	require.NoError(t, kw.Err(), "a refused downgrade keeps the write lease")
	require.NoError(t, kw.Release(context.Background()))

	m, err := mustMutex(t, c, lockPath(t)).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	_, err = rw.Downgrade(ctxTimeout(t, 10*time.Second), m)
	require.ErrorIs(t, err, zklock.ErrInvalidArgument)
	require.NoError(t, m.Release(context.Background()))

	other := rwOn(t, p)
	w, err := other.AcquireWrite(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	_, err = rw.Downgrade(ctxTimeout(t, 10*time.Second), w)
	require.ErrorIs(t, err, zklock.ErrInvalidArgument, "another client's lease")
	require.Len(t, lockChildren(t, obs, p), 1)
	require.NoError(t, w.Release(context.Background()))
}

// A writer whose node is gone, unbeknown to it, makes no reader: the
// transaction's check fails, and the downgrade reports the loss.
func TestRWMutexDowngradeOfALostWriterMakesNoReader(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	rw := rwOn(t, p, zklock.WithOwnNodeWatch(false)) // so the deletion goes unseen
	w, err := rw.AcquireWrite(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	require.NoError(t, obs.Delete(w.Node(), -1))
	other, err := rwOn(t, p).AcquireWrite(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	_, err = rw.Downgrade(ctxTimeout(t, 10*time.Second), w)
	require.ErrorIs(t, err, zklock.ErrLockLost)
	require.ErrorIs(t, w.Err(), zklock.ErrLockLost)
	require.Equal(t, []string{path.Base(other.Node())}, lockChildren(t, obs, p), "no reader ahead of the new writer")
	require.NoError(t, other.Release(context.Background()))
}

// A downgrade whose reply is lost (the connection cut after the server made
// the reader) finds its reader by the GUID: one reader, the writer gone.
func TestRWMutexDowngradeLostReplyAdoptsTheReader(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	rw, err := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(testSession)).NewRWMutex(p)
	require.NoError(t, err)
	w, err := rw.AcquireWrite(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	wtok := tokenOf(w)
	proxy.StallReplies()
	done := make(chan acquired, 1)
	go func() {
		r, err := rw.Downgrade(ctxTimeout(t, 10*time.Second), w)
		done <- acquired{r, err}
	}()
	waitChildren(t, obs, p, 2) // the reader is made; the reply is held
	proxy.Cut()
	proxy.Resume()
	r := got(t, done)
	require.ErrorIs(t, w.Err(), zklock.ErrReleased)
	require.Equal(t, []string{path.Base(r.Node())}, lockChildren(t, obs, p), "exactly the adopted reader")
	assert.Equal(t, wtok, tokenOf(r), "the adopted reader keeps the writer's token")
	require.NoError(t, r.Release(context.Background()))
	require.Empty(t, lockChildren(t, obs, p))
}

// A downgrade whose ctx ends while its transaction is out keeps the write
// lease, and its reader, made after all, is removed once the reply comes.
func TestRWMutexDowngradeGivenUpKeepsTheWriterAndNoReader(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	rw, err := connectVia(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(testSession)).NewRWMutex(p)
	require.NoError(t, err)
	w, err := rw.AcquireWrite(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	tokenOf(w)
	proxy.StallReplies()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan acquired, 1)
	go func() {
		r, err := rw.Downgrade(ctx, w)
		done <- acquired{r, err}
	}()
	waitChildren(t, obs, p, 2) // the reader is made; the reply is held
	cancel()
	a := <-done
	require.ErrorIs(t, a.err, context.Canceled)
	require.Nil(t, a.l)
	proxy.Resume()
	waitChildren(t, obs, p, 1)
	require.Equal(t, []string{path.Base(w.Node())}, lockChildren(t, obs, p), "the writer stays, the reader went")
	require.NoError(t, w.Err(), "the write lease is kept")
	_, err = rwOn(t, p).TryAcquireRead(ctxTimeout(t, 10*time.Second))
	require.ErrorIs(t, err, zklock.ErrLocked)
	require.NoError(t, w.Release(context.Background()))
}

// A downgrade whose writer's delete the server refuses (an ACL) returns the
// read lease with that error: the write lease is still held, and releasing
// it, were the ACL lifted, finishes the downgrade.
func TestRWMutexDowngradeRefusedWriterDeleteKeepsBoth(t *testing.T) {
	t.Parallel()
	p, obs := noDeletePath(t)
	rw, err := connect(t, zklock.WithCleanupDelay(0)).NewRWMutex(p)
	require.NoError(t, err)
	w, err := rw.AcquireWrite(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	r, err := rw.Downgrade(ctxTimeout(t, 10*time.Second), w)
	require.ErrorIs(t, err, zk.ErrNoAuth)
	require.ErrorContains(t, err, "still held")
	require.NotNil(t, r)
	require.NoError(t, w.Err(), "the write lease is kept")
	require.NoError(t, r.Err())
	require.Len(t, lockChildren(t, obs, p), 2)
	_, err = rwOn(t, p).TryAcquireRead(ctxTimeout(t, 10*time.Second))
	require.ErrorIs(t, err, zklock.ErrLocked, "the writer still excludes readers")
}
