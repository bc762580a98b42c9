package zklock

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func lockNames(seqs ...int) []string {
	out := make([]string, len(seqs))
	for i, s := range seqs {
		out[i] = fmt.Sprintf("_c_%032d-lock-%010d", s, s)
	}
	return out
}

func TestPureMutexTurn(t *testing.T) {
	children := append(lockNames(7, 3, 5), "not-a-lock-node")
	names := lockNames(3, 5, 7)
	require.Equal(t, turn{present: true, holds: true}, readTurn(mutexTurn, children, names[0]))
	require.Equal(t, turn{present: true, blocker: names[0], last: true}, readTurn(mutexTurn, children, names[1]),
		"behind the holder: its leaving is enough")
	require.Equal(t, turn{present: true, blocker: names[1]}, readTurn(mutexTurn, children, names[2]),
		"behind a waiter: look again when it goes")
	require.Equal(t, turn{}, readTurn(mutexTurn, children, lockNames(4)[0]), "absent")
}

// twoPermits is a semaphore rule of two permits, to show that the shared wait
// serves other primitives: the first two hold, the rest wait two places ahead.
func twoPermits(_ []lockNode, me int) (bool, int) {
	if me < 2 {
		return true, -1
	}
	return false, me - 2
}

func TestPureOtherRulesShareTheWait(t *testing.T) {
	children := lockNames(1, 2, 3, 4)
	names := children
	require.True(t, readTurn(twoPermits, children, names[1]).holds)
	require.Equal(t, turn{present: true, blocker: names[0], last: true}, readTurn(twoPermits, children, names[2]))
	require.Equal(t, turn{present: true, blocker: names[1]}, readTurn(twoPermits, children, names[3]),
		"when its blocker goes it is still third: look again")
}
