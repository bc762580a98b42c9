package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock/zktest"
)

// status --show-servers prints the servers given, or, on an ensemble that
// publishes its members' client addresses and was moved by a reconfig,
// every member it lists, though --servers names only one of them.
func TestStatusShowsTheServersItDials(t *testing.T) {
	t.Parallel()
	code, out, stderr := runZK(t, 20*time.Second, "status", "--show-servers", "--servers", cluster.Addrs()[0], lockPath(t))
	require.Equal(t, 0, code, stderr)
	require.True(t, strings.HasPrefix(out, "servers: "+cluster.Addrs()[0]+" (as given)\n"), out)

	zc := zktest.Start(t, zktest.WithEnsemble(3), zktest.WithReconfig(), zktest.WithLogf(nil))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := zc.AddServer(ctx)
	require.NoError(t, err)
	require.NoError(t, zc.RemoveServer(ctx, 0))
	members := zc.Addrs() // servers 2, 3 and the new 4
	code, out, stderr = runZK(t, 20*time.Second, "status", "--show-servers", "--servers", members[0], lockPath(t))
	require.Equal(t, 0, code, stderr)
	want := append([]string(nil), members...)
	slices.Sort(want)
	require.True(t, strings.HasPrefix(out, "servers: "+strings.Join(want, ",")+" (following the ensemble's configuration)\n"), out)
}
