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
// publishes its members' client addresses, every member it lists, though
// --servers names only one of them.
func TestStatusShowsTheServersItDials(t *testing.T) {
	t.Parallel()
	code, out, stderr := runZK(t, 20*time.Second, "status", "--show-servers", "--servers", cluster.Addrs()[0], lockPath(t))
	require.Equal(t, 0, code, stderr)
	require.True(t, strings.HasPrefix(out, "servers: "+cluster.Addrs()[0]+" (as given)\n"), out)

	// One member with dynamic reconfiguration, and a second one added.
	zc := zktest.Start(t, zktest.WithReconfig(), zktest.WithLogf(nil))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := zc.AddServer(ctx)
	require.NoError(t, err)
	members := zc.Addrs()
	code, out, stderr = runZK(t, 20*time.Second, "status", "--show-servers", "--servers", members[0], lockPath(t))
	require.Equal(t, 0, code, stderr)
	want := append([]string(nil), members...)
	slices.Sort(want)
	require.True(t, strings.HasPrefix(out, "servers: "+strings.Join(want, ",")+" (following the ensemble's configuration)\n"), out)
}
