package zklock_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
)

// pausedHolder makes, with a raw connection, a holder in zklock's format
// that published a hold limit and stamped its grant, and whose own timer
// never runs (a paused process): its node stays until someone deletes it.
func pausedHolder(t *testing.T, c *zklock.Client, p string, limit time.Duration) (string, *zk.Stat) {
	t.Helper()
	require.NoError(t, zklock.EnsureParents(ctxTimeout(t, 5*time.Second), c, p))
	peer := observer(t)
	rec, err := json.Marshal(zklock.Owner{Host: "paused", PID: 1, Client: "0123456789abcdef", Since: time.Now(), MaxHold: limit, Held: true})
	require.NoError(t, err)
	node, err := peer.Create(p+"/_c_0123456789abcdef0000000000000001-lock-", rec, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	_, stat, err := peer.Get(node)
	require.NoError(t, err)
	return node, stat
}

// The interleaving: a holder past its published limit by the server's clock
// whose timer cannot run. A waiter opted in (WithBreakOverdue) deletes its
// node no earlier than the stamp plus the limit plus half the session
// timeout, and holds with a larger fencing token, which a resource that
// checks tokens prefers to the paused holder's.
func TestBreakOverdueHolderPastItsLimit(t *testing.T) {
	t.Parallel()
	const limit = 300 * time.Millisecond
	p := lockPath(t)
	obs := observer(t)
	c := connect(t, zklock.WithBreakOverdue())
	node, stat := pausedHolder(t, c, p, limit)
	m := mustMutex(t, c, p)
	l, err := m.Acquire(ctxTimeout(t, 30*time.Second))
	require.NoError(t, err)
	defer l.Release(context.Background())

	ok, _, err := obs.Exists(node)
	require.NoError(t, err)
	require.False(t, ok, "the overdue holder's node was deleted")
	now := serverNow(t, obs, p+".clock")
	earliest := time.UnixMilli(stat.Mtime).Add(limit + testSession/2)
	require.False(t, now.Before(earliest), "broken no earlier than the stamp + limit + grace (server %v, earliest %v)", now, earliest)
	token := tokenOf(l)
	require.Greater(t, token, stat.Czxid, "the new holder's token fences the paused one out")
}

// Without WithBreakOverdue a waiter never breaks a holder, however overdue.
func TestNoBreakWithoutOptIn(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	c := connect(t)
	node, _ := pausedHolder(t, c, p, time.Millisecond)
	_, err := mustMutex(t, c, p).Acquire(ctxTimeout(t, testSession/2+time.Second))
	require.True(t, errors.Is(err, context.DeadlineExceeded), "err %v", err)
	ok, _, err := obs.Exists(node)
	require.NoError(t, err)
	require.True(t, ok)
}

// A running holder with a limit ends its own lease (ErrHoldLimit) before an
// opted-in waiter would break it: its grant stamp is what the waiter reads.
func TestRunningHolderEndsItselfBeforeBeingBroken(t *testing.T) {
	t.Parallel()
	const limit = 300 * time.Millisecond
	p := lockPath(t)
	holder := connect(t, zklock.WithMaxHold(limit))
	waiter := connect(t, zklock.WithBreakOverdue())
	h, err := mustMutex(t, holder, p).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	l, err := mustMutex(t, waiter, p).Acquire(ctxTimeout(t, 30*time.Second))
	require.NoError(t, err)
	defer l.Release(context.Background())
	require.ErrorIs(t, h.Err(), zklock.ErrHoldLimit, "the holder ended itself; nobody deleted its node")
}

// "No limit" spelled as the largest limit must not wrap around to a
// deadline in the past: the running holder is never broken.
func TestHugeMaxHoldIsNeverOverdue(t *testing.T) {
	t.Parallel()
	p := lockPath(t)
	obs := observer(t)
	holder := connect(t, zklock.WithMaxHold(time.Duration(math.MaxInt64)))
	waiter := connect(t, zklock.WithBreakOverdue())
	h, err := mustMutex(t, holder, p).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	eventually(t, "the grant stamp lands", func() bool {
		data, _, err := obs.Get(h.Node())
		return err == nil && strings.Contains(string(data), `"held":true`)
	})
	_, err = mustMutex(t, waiter, p).Acquire(ctxTimeout(t, 2*time.Second))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, h.Err(), "the holder was not broken")
}

// A break the server refuses (the lock path's ACL without delete, for a
// moment) is tried again: once deletes are allowed, the overdue holder goes.
func TestOverdueBreakIsTriedAgain(t *testing.T) {
	t.Parallel()
	const limit = 300 * time.Millisecond
	p := lockPath(t)
	obs := observer(t)
	c := connect(t, zklock.WithBreakOverdue())
	node, stat := pausedHolder(t, c, p, limit)
	acl, _, err := obs.GetACL(p)
	require.NoError(t, err)
	_, err = obs.SetACL(p, zk.WorldACL(zk.PermCreate|zk.PermRead|zk.PermWrite|zk.PermAdmin), -1)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		l, err := mustMutex(t, c, p).Acquire(ctxTimeout(t, 20*time.Second))
		if err == nil {
			_ = l.Release(context.Background())
		}
		done <- err
	}()
	earliest := time.UnixMilli(stat.Mtime).Add(limit + testSession/2)
	for serverNow(t, obs, p+".clock").Before(earliest.Add(time.Second)) {
		time.Sleep(100 * time.Millisecond) // the server's clock passes the bound: the first break is refused
	}
	_, err = obs.SetACL(p, acl, -1)
	require.NoError(t, err)
	require.NoError(t, <-done, "the break was tried again")
	ok, _, err := obs.Exists(node)
	require.NoError(t, err)
	require.False(t, ok)
}
