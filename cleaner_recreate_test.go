package zklock_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
)

// A lock path this client made, once used and released: the cleaner may
// remove it. The delay is long: the tests run the cleanup with CleanNow.
func usedPath(t *testing.T) (*zklock.Client, *zk.Conn, string) {
	obs := observer(t)
	root := cleanRoot(t, obs) + "/a"
	c := connect(t, zklock.WithCleanupRoot(root), zklock.WithCleanupDelay(time.Hour))
	p := root + "/kz"
	l, err := mustMutex(t, c, p).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	require.NoError(t, l.Release(context.Background()))
	return c, obs, p
}

// recreateAtRead deletes and re-creates p, as the server's container check
// and then kazoo's Lock (ensure_path) do, at the cleaner's read number n of
// p; it returns the count of reads and the re-created node's czxid.
func recreateAtRead(t *testing.T, obs *zk.Conn, p string, n int) (*int, *int64) {
	reads, czxid := new(int), new(int64)
	zklock.SetHookCleanerRead(func(q string) {
		if q != p {
			return
		}
		if *reads++; *reads != n {
			return
		}
		require.NoError(t, obs.Delete(p, -1))
		_, err := obs.Create(p, []byte{}, 0, zk.WorldACL(zk.PermAll))
		require.NoError(t, err)
		_, stat, err := obs.Exists(p)
		require.NoError(t, err)
		*czxid = stat.Czxid
	})
	t.Cleanup(func() { zklock.SetHookCleanerRead(nil) })
	return reads, czxid
}

// requireRecreatedKept checks that the re-created node is still there, its
// data as made, and that its creator's next step (its lock node) works.
func requireRecreatedKept(t *testing.T, obs *zk.Conn, p string, czxid int64) {
	t.Helper()
	data, stat, err := obs.Get(p)
	require.NoError(t, err, "the cleaner deleted a path someone else re-created")
	require.Equal(t, czxid, stat.Czxid)
	require.Empty(t, data)
	_, err = obs.Create(p+"/0123456789abcdef__lock__", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	require.NoError(t, err, "the re-creator's lock node")
}

// The suspicion of issue 27: the cleaner reads an empty path of its own,
// then someone deletes it and creates it again (version 0, as the one it
// read), then the cleaner's delete with the version it read would remove
// the new node, and kazoo's Lock, which creates its path once, fails.
func TestCleanerSparesPathRecreatedAfterItsRead(t *testing.T) {
	c, obs, p := usedPath(t)
	reads, czxid := recreateAtRead(t, obs, p, 1)
	zklock.CleanNow(c, p)
	require.GreaterOrEqual(t, *reads, 1)
	requireRecreatedKept(t, obs, p, *czxid)
	_, stat, err := obs.Exists(p)
	require.NoError(t, err)
	require.Equal(t, int32(1), stat.Version, "the stamp reached the new node: its version moved, nothing else")
}

// The same after the cleaner's stamp: the node made anew has version 0, the
// stamped one had 1, so the delete is refused.
func TestCleanerSparesPathRecreatedAfterItsStamp(t *testing.T) {
	c, obs, p := usedPath(t)
	reads, czxid := recreateAtRead(t, obs, p, 2)
	zklock.CleanNow(c, p)
	require.Equal(t, 2, *reads, "the cleaner reads the node's stat twice: from exists, then from the stamp")
	requireRecreatedKept(t, obs, p, *czxid)
}

// Without a race, the stamp costs one write and the path goes.
func TestCleanerStampsThenRemoves(t *testing.T) {
	c, obs, p := usedPath(t)
	reads, _ := recreateAtRead(t, obs, p, 0)
	zklock.CleanNow(c, p)
	require.Equal(t, 2, *reads)
	ok, _, err := obs.Exists(p)
	require.NoError(t, err)
	require.False(t, ok, "the cleaner left its own empty path")
}
