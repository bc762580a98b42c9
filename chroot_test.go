package zklock_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/zktest"
)

// chrootOf returns a chroot no other test uses (not created).
func chrootOf(t testing.TB) string {
	return fmt.Sprintf("/zklock-test/chroot-%d", pathSeq.Add(1))
}

// connectChroot opens a Client on the shared server under chroot, through
// addrs (the server's, or a proxy's).
func connectChroot(t testing.TB, addrs []string, chroot string, opts ...zklock.Option) *zklock.Client {
	t.Helper()
	s := strings.Join(addrs, ",") + chroot
	return connectVia(t, []string{s}, append([]zklock.Option{zklock.WithSessionTimeout(testSession)}, opts...)...)
}

// A chroot client and a plain client see the same nodes, the chroot client
// at the path the user gave, the plain one under the chroot; they exclude
// each other and hand the lock over both ways (a watch event's path comes
// back without the chroot).
func TestChrootSharesTheTree(t *testing.T) {
	t.Parallel()
	root := chrootOf(t)
	ch := connectChroot(t, cluster.Addrs(), root) // creates root and its ancestors
	plain := connect(t)
	obs := observer(t)

	const p = "/locks/x"
	l, err := mustMutex(t, ch, p).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(l.Node(), p+"/"), "the lease's node %q is under the path as given", l.Node())

	// The plain client sees the node under the chroot.
	kids := lockChildren(t, obs, root+p)
	require.Len(t, kids, 1)
	require.Equal(t, root+l.Node(), root+p+"/"+kids[0])

	cs, err := ch.Contenders(ctxTimeout(t, 5*time.Second), p)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	require.Equal(t, l.Node(), cs[0].Node)
	require.True(t, cs[0].Holder)
	cs, err = plain.Contenders(ctxTimeout(t, 5*time.Second), root+p)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	require.Equal(t, root+l.Node(), cs[0].Node)

	// The plain client waits behind the chroot client, then gets the lock.
	got := make(chan *zklock.Lease, 1)
	go func() {
		lp, err := mustMutex(t, plain, root+p).Acquire(ctxTimeout(t, 20*time.Second))
		if err != nil {
			t.Errorf("plain acquire: %v", err)
		}
		got <- lp
	}()
	waitChildren(t, obs, root+p, 2)
	require.NoError(t, l.Release(ctxTimeout(t, 5*time.Second)))
	lp := <-got
	require.NotNil(t, lp)

	// And the other way: the chroot client waits on a watch set through the chroot.
	got2 := make(chan *zklock.Lease, 1)
	go func() {
		l2, err := mustMutex(t, ch, p).Acquire(ctxTimeout(t, 20*time.Second))
		if err != nil {
			t.Errorf("chroot acquire: %v", err)
		}
		got2 <- l2
	}()
	waitChildren(t, obs, root+p, 2)
	cs, err = ch.Contenders(ctxTimeout(t, 5*time.Second), p)
	require.NoError(t, err)
	require.Len(t, cs, 2)
	require.Equal(t, strings.TrimPrefix(lp.Node(), root), cs[0].Node, "the plain holder's node, as the chroot client names it")
	require.NoError(t, lp.Release(ctxTimeout(t, 5*time.Second)))
	select {
	case l2 := <-got2:
		require.NotNil(t, l2)
		require.NoError(t, l2.Release(ctxTimeout(t, 5*time.Second)))
	case <-time.After(10 * time.Second):
		t.Fatal("the chroot client's watch never fired")
	}

	// Nothing escaped the chroot.
	ok, _, err := obs.Exists(p)
	require.NoError(t, err)
	require.False(t, ok, "%s outside the chroot", p)
}

// The requests zklock does not make go through the chroot too: a multi's
// creates come back without it, an exists and a get see the chroot's nodes.
func TestChrootRawRequests(t *testing.T) {
	t.Parallel()
	root := chrootOf(t)
	ch := connectChroot(t, cluster.Addrs(), root)
	obs := observer(t)
	conn := ch.Conn()

	acl := zk.WorldACL(zk.PermAll)
	res, err := conn.Multi(
		&zk.CreateRequest{Path: "/m", Data: []byte("a"), Acl: acl},
		&zk.CreateRequest{Path: "/m/s-", Data: []byte("b"), Acl: acl, Flags: zk.FlagSequence},
		&zk.SetDataRequest{Path: "/m", Data: []byte("c"), Version: 0},
		&zk.CheckVersionRequest{Path: "/m", Version: 1},
	)
	require.NoError(t, err)
	require.Equal(t, "/m", res[0].String)
	require.True(t, strings.HasPrefix(res[1].String, "/m/s-"), res[1].String)
	data, _, err := obs.Get(root + "/m")
	require.NoError(t, err)
	require.Equal(t, "c", string(data))

	name, err := conn.Create("/n", nil, 0, acl)
	require.NoError(t, err)
	require.Equal(t, "/n", name)
	kids, _, err := conn.Children("/")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"m", "n"}, kids)
	_, _, ev, err := conn.GetW("/n")
	require.NoError(t, err)
	_, err = obs.Set(root+"/n", []byte("x"), -1)
	require.NoError(t, err)
	select {
	case e := <-ev:
		require.Equal(t, "/n", e.Path)
		require.Equal(t, zk.EventNodeDataChanged, e.Type)
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event")
	}

	// A multi that fails reports its errors, paths untouched.
	_, err = conn.Multi(&zk.CreateRequest{Path: "/n", Acl: acl}, &zk.DeleteRequest{Path: "/m", Version: -1})
	require.ErrorIs(t, err, zk.ErrNodeExists)
	ok, _, err := obs.Exists(root + "/m")
	require.NoError(t, err)
	require.True(t, ok)
}

// A waiter's watch survives a reconnect through the chroot: go-zookeeper
// restores it with setWatches, whose paths get the chroot too.
func TestChrootWatchRestoredAfterReconnect(t *testing.T) {
	t.Parallel()
	root := chrootOf(t)
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	ch := connectChroot(t, []string{proxy.Addr()}, root)
	holder := connectChroot(t, cluster.Addrs(), root)
	obs := observer(t)

	const p = "/locks/w"
	l, err := mustMutex(t, holder, p).Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		l2, err := mustMutex(t, ch, p).Acquire(ctxTimeout(t, 30*time.Second))
		if err == nil {
			err = l2.Release(ctxTimeout(t, 5*time.Second))
		}
		got <- err
	}()
	waitChildren(t, obs, root+p, 2)
	proxy.Cut() // the waiter reconnects within its session
	eventually(t, "the waiter reconnected", func() bool { return proxy.ActiveConns() > 0 })
	require.NoError(t, l.Release(ctxTimeout(t, 5*time.Second)))
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter never took the lock after the reconnect")
	}
}

// A missing chroot is created with its ancestors; one the client may not
// create fails Connect, naming the chroot.
func TestChrootMissingIsCreated(t *testing.T) {
	t.Parallel()
	root := chrootOf(t) + "/deep/er"
	ch := connectChroot(t, cluster.Addrs(), root)
	obs := observer(t)
	ok, _, err := obs.Exists(root)
	require.NoError(t, err)
	require.True(t, ok)
	l, err := mustMutex(t, ch, "/a").Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	require.NoError(t, l.Release(ctxTimeout(t, 5*time.Second)))

	// A read-only parent: creating the chroot under it is refused.
	ro := chrootOf(t)
	_, err = obs.Create(ro, nil, 0, zk.WorldACL(zk.PermRead))
	require.NoError(t, err)
	_, err = zklock.Connect(ctxTimeout(t, 10*time.Second), []string{cluster.Addrs()[0] + ro + "/app"})
	require.ErrorIs(t, err, zk.ErrNoAuth)
	require.ErrorContains(t, err, "chroot "+ro+"/app")
}

// siblingTenant creates root+"-b", the tree a chroot client's op path "-b"
// would reach if the rewriter prefixed it, with a child to delete.
func siblingTenant(t *testing.T, obs *zk.Conn, root string) string {
	t.Helper()
	sib := root + "-b"
	acl := zk.WorldACL(zk.PermAll)
	_, err := obs.Create(sib, []byte("tenant-b"), 0, acl)
	require.NoError(t, err)
	_, err = obs.Create(sib+"/victim", []byte("keep"), 0, acl)
	require.NoError(t, err)
	return sib
}

// requireSiblingUntouched checks that nothing in sib changed.
func requireSiblingUntouched(t *testing.T, obs *zk.Conn, sib string) {
	t.Helper()
	data, stat, err := obs.Get(sib)
	require.NoError(t, err)
	require.Equal(t, "tenant-b", string(data))
	require.Equal(t, int32(0), stat.Version, "the sibling's data was written")
	kids, _, err := obs.Children(sib)
	require.NoError(t, err)
	require.Equal(t, []string{"victim"}, kids, "the sibling's children changed")
}

// A guarded write's op paths are checked before the chroot is put in front:
// under the chroot /…/chroot-N, "-b" must not become /…/chroot-N-b, a
// sibling tenant's tree. Every op kind is refused with ErrInvalidPath,
// nothing is sent, and the lease still holds.
func TestChrootGuardedWriteCannotReachSibling(t *testing.T) {
	t.Parallel()
	root := chrootOf(t)
	ch := connectChroot(t, cluster.Addrs(), root)
	obs := observer(t)
	sib := siblingTenant(t, obs, root)
	l, err := mustMutex(t, ch, "/locks/m").Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)

	acl := zk.WorldACL(zk.PermAll)
	ops := []struct {
		name string
		op   any
	}{
		{"set", &zk.SetDataRequest{Path: "-b", Data: []byte("owned"), Version: -1}},
		{"create", &zk.CreateRequest{Path: "-b/new", Data: []byte("x"), Acl: acl}},
		{"delete", &zk.DeleteRequest{Path: "-b/victim", Version: -1}},
		{"check", &zk.CheckVersionRequest{Path: "-b", Version: 0}},
		{"empty", &zk.CheckVersionRequest{Path: "", Version: -1}},
		{"dot-dot", &zk.SetDataRequest{Path: "/../chroot-b", Data: []byte("owned"), Version: -1}},
		{"sequential", &zk.CreateRequest{Path: "-b/s-", Acl: acl, Flags: zk.FlagSequence}},
	}
	for _, tc := range ops {
		// A valid op beside the bad one is not applied either.
		_, err := l.Multi(ctxTimeout(t, 5*time.Second), &zk.CreateRequest{Path: "/ok", Acl: acl}, tc.op)
		requireSiblingUntouched(t, obs, sib)
		require.ErrorIs(t, err, zklock.ErrInvalidPath, tc.name)
		require.NoError(t, l.Err(), "%s: the lease still holds", tc.name)
	}
	ok, _, err := obs.Exists(root + "/ok")
	require.NoError(t, err)
	require.False(t, ok, "an op of a refused multi was applied")

	// A sequential create may end in "/" (ZooKeeper appends the number).
	_, err = obs.Create(root+"/seq", nil, 0, acl)
	require.NoError(t, err)
	res, err := l.Multi(ctxTimeout(t, 5*time.Second), &zk.CreateRequest{Path: "/seq/", Acl: acl, Flags: zk.FlagSequence})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(res[0].String, "/seq/"), res[0].String)
	require.NoError(t, l.Release(ctxTimeout(t, 5*time.Second)))
}

// The rewriter itself refuses what it cannot keep inside the chroot, so a
// raw multi through Client.Conn, which go-zookeeper does not check, cannot
// reach the sibling either; the client reconnects and goes on.
func TestChrootRawMultiCannotReachSibling(t *testing.T) {
	t.Parallel()
	root := chrootOf(t)
	ch := connectChroot(t, cluster.Addrs(), root)
	obs := observer(t)
	sib := siblingTenant(t, obs, root)
	_, err := ch.Conn().Multi(&zk.SetDataRequest{Path: "-b", Data: []byte("owned"), Version: -1},
		&zk.DeleteRequest{Path: "-b/victim", Version: -1})
	requireSiblingUntouched(t, obs, sib)
	require.ErrorIs(t, err, zklock.ErrInvalidPath)

	l, err := mustMutex(t, ch, "/locks/after").Acquire(ctxTimeout(t, 10*time.Second))
	require.NoError(t, err)
	require.NoError(t, l.Release(ctxTimeout(t, 5*time.Second)))
}
