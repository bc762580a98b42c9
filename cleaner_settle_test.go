package zklock_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// A lock path's ancestor is created as a container; ZooKeeper never removes
// a container that never had a child. These tests break the create of one
// such ancestor at the worst moments (the caller gives up while the reply is
// held; the reply is lost) and check that the client's own cleaner removes
// it. The shared server checks containers only once a minute, and the nodes
// here never have a child, so only the cleaner can remove them.

// settleSetup returns a client whose cleanup root is "/" (so the first node
// it creates is a container), talking through a proxy, and a fresh path
// whose first component does not exist.
func settleSetup(t *testing.T, rec *recorder) (*zklock.Client, *zktest.Proxy, *zk.Conn, string) {
	obs := observer(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	c := connectVia(t, []string{proxy.Addr()}, zklock.WithCleanupRoot("/"),
		zklock.WithCleanupDelay(20*time.Millisecond), zklock.WithMetrics(rec))
	top := fmt.Sprintf("/zklock-settle-%d", pathSeq.Add(1))
	return c, proxy, obs, top
}

// cleanedBy waits until the client's cleaner has reported removing exactly
// paths (the server's container check reports nothing): the observer may see
// a delete before the client has read its reply.
func cleanedBy(t *testing.T, rec *recorder, paths ...string) {
	t.Helper()
	eventually(t, fmt.Sprintf("the cleaner reports removing %v", paths), func() bool { return len(rec.snapshot().cleaned) >= len(paths) })
	assert.Equal(t, paths, rec.snapshot().cleaned)
}

// ensureUntilCreated starts EnsureParents for top/lock with replies held and
// a ctx that ends d later, and returns once top exists on the server.
func ensureUntilCreated(t *testing.T, c *zklock.Client, proxy *zktest.Proxy, obs *zk.Conn, top string, d time.Duration) <-chan error {
	proxy.StallReplies()
	_, _, created, err := obs.ExistsW(top)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		done <- zklock.EnsureParents(ctx, c, top+"/lock")
	}()
	select {
	case <-created:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s was never created", top)
	}
	return done
}

func TestCleanerRemovesAncestorCreatedAfterCallerGaveUp(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	c, proxy, obs, top := settleSetup(t, rec)
	done := ensureUntilCreated(t, c, proxy, obs, top, 300*time.Millisecond)
	require.ErrorIs(t, <-done, context.DeadlineExceeded)
	proxy.Resume() // the create's reply arrives after the caller left

	waitGone(t, obs, top)
	cleanedBy(t, rec, top)
}

func TestCleanerRemovesAncestorWhoseCreateReplyWasLost(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	c, proxy, obs, top := settleSetup(t, rec)
	done := ensureUntilCreated(t, c, proxy, obs, top, 300*time.Millisecond)
	require.ErrorIs(t, <-done, context.DeadlineExceeded)
	proxy.Cut() // the reply is dropped with the connection
	proxy.Resume()

	waitGone(t, obs, top)
	cleanedBy(t, rec, top)
}

func TestCleanerRemovesAncestorFoundAfterLostReply(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	c, proxy, obs, top := settleSetup(t, rec)
	done := ensureUntilCreated(t, c, proxy, obs, top, 30*time.Second)
	proxy.Cut() // the create is retried and finds the node
	proxy.Resume()
	require.NoError(t, <-done)

	l, err := mustMutex(t, c, top+"/lock").Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	require.NoError(t, l.Release(context.Background()))
	waitGone(t, obs, top)
	cleanedBy(t, rec, top+"/lock", top)
}

func TestCleanerRemovesAncestorWhenRetryAfterLostReplyIsAbandoned(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	c, proxy, obs, top := settleSetup(t, rec)
	done := ensureUntilCreated(t, c, proxy, obs, top, 3*time.Second)
	proxy.Cut() // the reply is lost; the retry's reply (node exists) is held too
	require.ErrorIs(t, <-done, context.DeadlineExceeded)
	proxy.Resume()

	waitGone(t, obs, top)
	cleanedBy(t, rec, top)
}

// On a caller's connection (NewClient), Close does not wait for background
// work before the cleaner's last run: an ancestor whose create's reply
// comes after Close began is cleaned by the goroutine that hears it.
func TestCleanerRemovesAncestorCreatedWhileClosing(t *testing.T) {
	t.Parallel()
	obs := observer(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	conn, events := rawConn(t, []string{proxy.Addr()}, testSession)
	c, err := zklock.NewClient(conn, events, zklock.WithCleanupRoot("/"), zklock.WithCleanupDelay(20*time.Millisecond))
	require.NoError(t, err)
	top := fmt.Sprintf("/zklock-settle-%d", pathSeq.Add(1))
	eventually(t, "a session", func() bool { return conn.State() == zk.StateHasSession })
	done := ensureUntilCreated(t, c, proxy, obs, top, 30*time.Second)

	closed := make(chan struct{})
	go func() {
		defer close(closed)
		c.Close()
	}()
	require.ErrorIs(t, <-done, zklock.ErrClosed)
	proxy.Resume() // the create's reply comes after Close began
	<-closed
	waitGone(t, obs, top)
}

// A cleanup whose requests go unanswered (the client cut off from every
// server when its delay ends) is tried again after the delay, and removes
// the path once the client is back: dropped, it left paths that never had a
// child for good (the server removes none), and a lock path refused as
// nested kept the one it lies in refused to every caller.
func TestCleanerTriesAgainACleanupThatWentUnanswered(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	logs := &tailBuffer{}
	obs := observer(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	c := connectVia(t, []string{proxy.Addr()}, zklock.WithCleanupRoot("/"), zklock.WithCleanupDelay(300*time.Millisecond),
		zklock.WithMetrics(rec), zklock.WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	top := fmt.Sprintf("/zklock-settle-%d", pathSeq.Add(1))
	l, err := mustMutex(t, c, top+"/lock").Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	require.NoError(t, l.Release(ctxTimeout(t, 10*time.Second)))
	proxy.Block(true)
	proxy.Cut()
	eventually(t, "the cleanup went unanswered", func() bool { return strings.Contains(logs.String(), "cleanup unanswered") })
	ok, _, err := obs.Exists(top + "/lock")
	require.NoError(t, err)
	require.True(t, ok, "the path is there while the client is cut off")

	proxy.Block(false)
	waitGone(t, obs, top)
	cleanedBy(t, rec, top+"/lock", top)
}

// On a caller's connection that the caller closed, a cleanup's request
// fails at once, and is not tried again: the connection is gone for good
// (tried again, it looped every delay until Close, and Close waited out its
// whole cleanup timeout).
func TestCleanerDoesNotRetryOnAConnectionClosedForGood(t *testing.T) {
	t.Parallel()
	logs := &tailBuffer{}
	conn, events := rawConn(t, cluster.Addrs(), testSession)
	c, err := zklock.NewClient(conn, events, zklock.WithCleanupDelay(200*time.Millisecond),
		zklock.WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	require.NoError(t, err)
	eventually(t, "a session", func() bool { return conn.State() == zk.StateHasSession })
	l, err := mustMutex(t, c, lockPath(t)).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	require.NoError(t, l.Release(ctxTimeout(t, 10*time.Second)))
	conn.Close()
	time.Sleep(time.Second) // five delays: a retried cleanup would have said so each time
	start := time.Now()
	c.Close()
	assert.Less(t, time.Since(start), 500*time.Millisecond, "Close")
	assert.NotContains(t, logs.String(), "cleanup unanswered")
}
