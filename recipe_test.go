package zklock

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock/internal/lockpath"
)

// Which children a zklock node may share a path with, per way of naming it.
func TestPureCheckRecipe(t *testing.T) {
	const g = "0123456789abcdef0123456789abcdef"
	mutex := "_c_" + g + "-lock-0000000001"
	curatorMutex := "_c_8d2b0a4e-1f3c-4a5b-9c6d-7e8f9a0b1c2d-lock-0000000002"
	zkLock := "_c_" + g + "-lock-0000000003"
	kazooLock := "9f1c2d3e4b5a__lock__0000000004"
	kazooReader := "9f1c2d3e4b5a__rlock__0000000005"
	read := "_c_" + g + "-__READ__0000000006"
	write := "_c_" + g + "-__WRIT__0000000007"
	lease := "_c_" + g + "-lease-0000000008"
	kazooLease := "e3b0c44298fc1c149afbf4c8996fb924"
	latch := "_c_8d2b0a4e-1f3c-4a5b-9c6d-7e8f9a0b1c2d-latch-0000000009"
	tests := []struct {
		style   lockpath.Style
		ok      []string
		refused []string
	}{
		{lockpath.MutexStyle, []string{mutex, curatorMutex, zkLock, kazooLock}, []string{read, write, kazooReader, lease, latch, "locks", "leases", kazooLease, "child"}},
		{lockpath.LatchStyle, []string{latch, "_c_" + g + "-latch-0000000010"}, []string{mutex, curatorMutex, kazooLock, read, kazooReader, lease, "locks", kazooLease}},
		{lockpath.CuratorRead, []string{read, write}, []string{mutex, kazooLock, kazooReader, lease, "locks", kazooLease}},
		{lockpath.CuratorWrite, []string{read, write}, []string{mutex, kazooLock, kazooReader, lease, "leases", kazooLease}},
		{lockpath.KazooRead, []string{kazooLock, kazooReader}, []string{mutex, read, write, lease, "locks", kazooLease}},
		{lockpath.KazooWrite, []string{kazooLock, kazooReader}, []string{mutex, read, write, lease, "locks", kazooLease}},
		{lockpath.SemaphoreLease, []string{lease}, []string{mutex, kazooLock, read, write, latch, "locks", kazooLease}},
	}
	for _, tt := range tests {
		require.NoError(t, checkRecipe("/p", tt.style, tt.ok), "%+v", tt.style)
		require.NoError(t, checkRecipe("/p", tt.style, nil))
		for _, bad := range tt.refused {
			err := checkRecipe("/p", tt.style, append(append([]string{}, tt.ok...), bad))
			require.ErrorIs(t, err, ErrIncompatible, "%+v next to %s", tt.style, bad)
			assert.Contains(t, err.Error(), "/p holds "+bad)
			assert.Contains(t, err.Error(), "zklock primitive for this path")
		}
	}
}

// A semaphore's path may hold its layout only.
func TestPureCheckLayout(t *testing.T) {
	require.NoError(t, checkLayout("/s", []string{"locks", "leases"}))
	require.NoError(t, checkLayout("/s", nil))
	err := checkLayout("/s", []string{"locks", "e3b0c44298fc1c149afbf4c8996fb924"})
	require.ErrorIs(t, err, ErrIncompatible)
	assert.Contains(t, err.Error(), "kazoo's Semaphore")
	require.ErrorIs(t, checkLayout("/s", []string{"_c_x-lock-0000000001"}), ErrIncompatible)
}

// No name makes the check panic, and a refusal always names the node and
// wraps ErrIncompatible; nodes a mutex joins are exactly the mutex markers.
func FuzzCheckRecipe(f *testing.F) {
	f.Add("_c_ab-lock-0000000001")
	f.Add("x__lock__0000000002")
	f.Add("locks")
	f.Add("-2147483648")
	f.Add("_c_ab-__READ__-2147483648")
	f.Fuzz(func(t *testing.T, name string) {
		err := checkRecipe("/p", lockpath.MutexStyle, []string{name})
		n, parsed := lockpath.Parse(name)
		joinsMutex := parsed && (n.Marker == "-lock-" || n.Marker == "__lock__")
		if joinsMutex {
			require.NoError(t, err)
			return
		}
		require.True(t, errors.Is(err, ErrIncompatible), "%q: %v", name, err)
		require.True(t, strings.Contains(err.Error(), name))
	})
}

// checkRecipe is what a waiter's listing of path says of the recipes on it
// (readListing): ErrIncompatible naming the first node that a node named in
// style must not share path with, or nil.
func checkRecipe(path string, style lockpath.Style, children []string) error {
	_, err := (&queueNode{path: path, style: style}).readListing(children)
	return err
}
