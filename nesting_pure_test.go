package zklock

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A path segment named like a lock node would be read as a member of its
// parent's queue: it is an invalid path, for every primitive.
func TestPureSegmentNamedLikeALockNodeIsInvalid(t *testing.T) {
	for _, p := range []string{
		"/app/_c_0f9f0d41-98a4-4be7-9b8e-0123456789ab-lock-0000000001/x",
		"/app/x-lock-0000000007",
		"/app/__lock__0000000003/y",
		"/app/x__READ__0000000003",
	} {
		err := validatePath(p)
		require.ErrorIs(t, err, ErrInvalidPath, p)
		require.ErrorContains(t, err, "named like a lock node", p)
	}
	for _, p := range []string{"/locks/report", "/app/lock", "/app/locks/leases-x", "/app/lock-1"} {
		require.NoError(t, validatePath(p), p)
	}
}

// A MultiLock whose members nest is refused without I/O: while one client
// held {P, P/inner}, a second asking for the same set got ErrIncompatible
// at once instead of waiting (P/inner is a child of P, in P's queue).
func TestPureNestedSetIsRefused(t *testing.T) {
	err := checkNestedSet([]string{"/app/p", "/app/p/inner"})
	require.ErrorIs(t, err, ErrNestedPath)
	require.ErrorContains(t, err, "/app/p/inner lies inside /app/p")
	require.ErrorIs(t, checkNestedSet([]string{"/app/p", "/app/p/a/b"}), ErrNestedPath)
	require.NoError(t, checkNestedSet([]string{"/app/p", "/app/p2", "/app/pq"}), "siblings sharing a prefix do not nest")
}
