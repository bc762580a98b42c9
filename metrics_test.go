package zklock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
)

// recorder is a Metrics that keeps everything it is told.
type recorder struct {
	mu       sync.Mutex
	acquired []string // kind + outcome
	queued   []int
	ended    []string // kind + loss cause or end
	cleaned  []string
	retried  int
	yields   [][]string
}

func (r *recorder) Acquired(kind string, _ time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := "ok"
	switch {
	case errors.Is(err, zklock.ErrLocked):
		out = "locked"
	case err != nil:
		out = "error"
	}
	r.acquired = append(r.acquired, kind+":"+out)
}

func (r *recorder) Queued(_ string, n int) {
	r.mu.Lock()
	r.queued = append(r.queued, n)
	r.mu.Unlock()
}

func (r *recorder) Ended(kind string, held time.Duration, why error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	end := zklock.LossCause(why)
	if end == "" {
		end = "released"
	}
	r.ended = append(r.ended, kind+":"+end)
}

func (r *recorder) CleanerDeleted(p string) {
	r.mu.Lock()
	r.cleaned = append(r.cleaned, p)
	r.mu.Unlock()
}
func (r *recorder) Retried() { r.mu.Lock(); r.retried++; r.mu.Unlock() }

func (r *recorder) MultiLockYielded(paths []string) {
	r.mu.Lock()
	r.yields = append(r.yields, paths)
	r.mu.Unlock()
}

func (r *recorder) snapshot() recorder {
	r.mu.Lock()
	defer r.mu.Unlock()
	return recorder{acquired: append([]string(nil), r.acquired...), queued: append([]int(nil), r.queued...),
		ended: append([]string(nil), r.ended...), cleaned: append([]string(nil), r.cleaned...), retried: r.retried}
}

func TestMetricsHooks(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	rec := &recorder{}
	c := connect(t, zklock.WithMetrics(rec), zklock.WithCleanupDelay(time.Millisecond))
	m := mustMutex(t, c, p)
	l, err := m.Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	_, err = mustMutex(t, c, p).TryAcquire(ctxTimeout(t, 10*time.Second))
	require.ErrorIs(t, err, zklock.ErrLocked)
	require.NoError(t, l.Release(context.Background()))

	rw, err := c.NewRWMutex(p)
	require.NoError(t, err)
	r, err := rw.AcquireRead(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	tokenOf(r)
	require.NoError(t, observer(t).Delete(r.Node(), -1))
	<-r.Done()
	eventually(t, "the cleaner removed the path", func() bool {
		s := rec.snapshot()
		return len(s.cleaned) > 0
	})

	sem, err := c.NewSemaphore(p+"-sem", 2)
	require.NoError(t, err)
	sl, err := sem.Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	require.NoError(t, sl.Release(context.Background()))

	s := rec.snapshot()
	assert.Equal(t, []string{"mutex:ok", "mutex:locked", "read:ok", "semaphore:ok"}, s.acquired, "the semaphore's turnstile is not reported")
	assert.Equal(t, []int{1, 2, 1, 1}, s.queued, "the queue each Acquire joined, itself included")
	assert.Equal(t, []string{"mutex:released", "read:node_deleted", "semaphore:released"}, s.ended)
	assert.Contains(t, s.cleaned, p)
	assert.Zero(t, s.retried)
}

func TestLossCause(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "", zklock.LossCause(nil))
	assert.Equal(t, "", zklock.LossCause(zklock.ErrReleased))
	assert.Equal(t, "connection_lost", zklock.LossCause(zklock.ErrLockLost))
}
