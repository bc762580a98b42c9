package zklock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
)

// backend counts the Releases a lease made by NewLease asks for.
type backend struct {
	releases int
	err      error
}

func (b *backend) Release(context.Context) error { b.releases++; return b.err }

func newExternal(t *testing.T) (*zklock.Lease, func(error), *backend) {
	t.Helper()
	b := &backend{}
	l, end := zklock.NewLease(b, zklock.LeaseInfo{Node: "/a/_c_x-lock-0000000007", Sequence: 7, Token: 42})
	return l, end, b
}

// A lease made by NewLease answers as a node's lease does.
func TestPureNewLeaseReleases(t *testing.T) {
	ctx := context.Background()
	l, end, b := newExternal(t)
	require.NoError(t, l.Err())
	require.Equal(t, "/a/_c_x-lock-0000000007", l.Node())
	require.EqualValues(t, 7, l.Sequence())
	tok, err := l.Token(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 42, tok)
	require.NoError(t, l.Release(ctx))
	<-l.Done()
	require.ErrorIs(t, l.Err(), zklock.ErrReleased)
	require.ErrorIs(t, l.Release(ctx), zklock.ErrNotHeld)
	end(nil) // after the end: nothing
	require.ErrorIs(t, l.Err(), zklock.ErrReleased)
	require.Equal(t, 1, b.releases)
}

// end takes the lease away: the loss once from Release, then ErrNotHeld;
// ErrClosed, as Close, leaves Release nothing but ErrNotHeld.
func TestPureNewLeaseEnds(t *testing.T) {
	ctx := context.Background()
	l, end, b := newExternal(t)
	end(nil)
	<-l.Done()
	require.ErrorIs(t, l.Err(), zklock.ErrLockLost)
	require.ErrorIs(t, l.Release(ctx), zklock.ErrLockLost)
	require.ErrorIs(t, l.Release(ctx), zklock.ErrNotHeld)
	require.Zero(t, b.releases, "a lost lease has nothing to release")

	l, end, _ = newExternal(t)
	end(zklock.ErrClosed)
	require.ErrorIs(t, l.Err(), zklock.ErrClosed)
	require.ErrorIs(t, l.Release(ctx), zklock.ErrNotHeld)
}

// A backend's failed Release ends the lease all the same and is returned.
func TestPureNewLeaseBackendError(t *testing.T) {
	l, _, b := newExternal(t)
	b.err = errors.New("backend down")
	require.ErrorIs(t, l.Release(context.Background()), b.err)
	require.ErrorIs(t, l.Err(), zklock.ErrReleased)
}

// What such a lease cannot do fails plainly; a bad LeaseInfo is a panic.
func TestPureNewLeaseLimits(t *testing.T) {
	l, _, _ := newExternal(t)
	_, err := l.Multi(context.Background())
	require.ErrorIs(t, err, errors.ErrUnsupported)
	require.ErrorIs(t, zklock.NewLeadership(l, "v").Proclaim(context.Background(), "w"), errors.ErrUnsupported)
	require.Panics(t, func() { zklock.NewLease(&backend{}, zklock.LeaseInfo{Node: "rel", Token: 1}) })
	require.Panics(t, func() { zklock.NewLease(&backend{}, zklock.LeaseInfo{Node: "/a/n", Token: 0}) })
}
