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
	require.False(t, a.predicts("/a"), "unseen")
	a.learn("/a", true)
	require.False(t, a.predicts("/a"), "once at once may be a gap in a queue")
	a.learn("/a", true)
	require.True(t, a.predicts("/a"))
	a.learn("/a", true)
	require.True(t, a.predicts("/a"), "the count saturates")
	a.learn("/a", false)
	require.False(t, a.predicts("/a"), "a wait starts over")
	a.learn("/a", true)
	require.False(t, a.predicts("/a"))

	expected := 0
	for i := range 1000 {
		p := fmt.Sprintf("/p%d", i)
		a.learn(p, i%2 == 0)
		a.learn(p, i%2 == 0)
	}
	for i := range 1000 {
		if a.predicts(fmt.Sprintf("/p%d", i)) == (i%2 == 0) {
			expected++
		}
	}
	require.Greater(t, expected, 950, "at most a few paths share a bit")
}
