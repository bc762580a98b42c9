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
	a.learn("/b", false) // the client's history mixed: 4 of 6 at once below
	a.learn("/a", true)
	require.False(t, a.predicts("/a"), "once at once again, and the client's history no guide")

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

// A path not seen yet (or seen once at once) follows the client's recent
// acquisitions on all paths: expected to hold at once once three in four of
// the last ones did, counting up to priorWindow of them, and not before
// priorMin were seen.
func TestPureAtOnceUnseenPathFollowsTheClient(t *testing.T) {
	a := newAtOnce()
	for i := range priorMin - 1 {
		a.learn(fmt.Sprintf("/scattered/%d", i), true)
	}
	require.False(t, a.predicts("/new"), "too few acquisitions to go by")
	a.learn("/scattered/last", true)
	require.True(t, a.predicts("/new"), "all of priorMin held at once")
	a.learn("/busy", false)
	require.True(t, a.predicts("/new"), "four of five")
	a.learn("/busy", false)
	require.False(t, a.predicts("/new"), "four of six")
	for i := range priorWindow {
		a.learn(fmt.Sprintf("/more/%d", i), true)
	}
	for range priorWindow / 4 {
		a.learn("/busy", false)
	}
	require.True(t, a.predicts("/new"), "exactly three in four of the last priorWindow")
	require.False(t, a.predicts("/busy"), "a path that waited keeps its own count")
	a.learn("/busy", false)
	require.False(t, a.predicts("/new"), "one wait more")
	a.learn("/once", true)
	require.False(t, a.predicts("/once"), "a path seen once at once, with the client's history too mixed")
	for i := range priorWindow {
		a.learn(fmt.Sprintf("/again/%d", i), true)
	}
	require.True(t, a.predicts("/once"), "and with a client that holds at once nearly always")
}
