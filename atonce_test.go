package zklock

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// A path not seen yet is not expected to hold at once, nor one whose last
// acquisition alone did; each path keeps its own count (paths hashed to one
// slot share it, which costs only a guess).
func TestPureAtOnceRemembersTheLastOutcomePerPath(t *testing.T) {
	a := newAtOnce()
	require.False(t, a.expected("/a"), "unseen")
	a.record("/a", true)
	require.False(t, a.expected("/a"), "once at once may be a gap in a queue")
	a.record("/a", true)
	require.True(t, a.expected("/a"))
	a.record("/a", true)
	require.True(t, a.expected("/a"), "the count saturates")
	a.record("/a", false)
	require.False(t, a.expected("/a"), "a wait starts over")
	a.record("/a", true)
	require.False(t, a.expected("/a"))

	expected := 0
	for i := range 1000 {
		p := fmt.Sprintf("/p%d", i)
		a.record(p, i%2 == 0)
		a.record(p, i%2 == 0)
	}
	for i := range 1000 {
		if a.expected(fmt.Sprintf("/p%d", i)) == (i%2 == 0) {
			expected++
		}
	}
	require.Greater(t, expected, 950, "at most a few paths share a bit")
}
