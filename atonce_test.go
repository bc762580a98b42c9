package zklock

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// A path not seen yet is not expected to hold at once; each path keeps its
// own last outcome (paths hashed to one bit share it, which costs only a
// guess).
func TestPureAtOnceRemembersTheLastOutcomePerPath(t *testing.T) {
	a := newAtOnce()
	require.False(t, a.expected("/a"), "unseen")
	a.record("/a", true)
	require.True(t, a.expected("/a"))
	a.record("/a", false)
	require.False(t, a.expected("/a"))

	expected := 0
	for i := range 1000 {
		p := fmt.Sprintf("/p%d", i)
		a.record(p, i%2 == 0)
	}
	for i := range 1000 {
		if a.expected(fmt.Sprintf("/p%d", i)) == (i%2 == 0) {
			expected++
		}
	}
	require.Greater(t, expected, 950, "at most a few paths share a bit")
}
