package zktest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock/zktest"
)

// A reconfig retried after a lost reply is taken as made when the config
// has every joiner's line and none of the leavers'.
func TestPureReconfigApplied(t *testing.T) {
	config := "server.1=127.0.0.1:1:2:participant;127.0.0.1:3\nserver.4=127.0.0.1:4:5:participant;127.0.0.1:6\nversion=10000000a"
	join := []string{"server.4=127.0.0.1:4:5:participant;127.0.0.1:6"}
	require.True(t, zktest.ReconfigApplied(config, join, nil))
	require.True(t, zktest.ReconfigApplied(config, nil, []string{"2"}))
	require.True(t, zktest.ReconfigApplied(config, join, []string{"2", "3"}))
	require.False(t, zktest.ReconfigApplied(config, []string{"server.5=127.0.0.1:7:8:participant;127.0.0.1:9"}, nil), "a joiner missing")
	require.False(t, zktest.ReconfigApplied(config, nil, []string{"1"}), "a leaver still there")
	require.True(t, zktest.ReconfigApplied("server.11=127.0.0.1:1:2:participant;127.0.0.1:3", nil, []string{"1"}), "ids compared whole")
}
