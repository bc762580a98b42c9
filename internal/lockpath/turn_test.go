package lockpath

import (
	"fmt"
	"hash/fnv"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bare is t without the nodes ahead, for comparing turns.
func bare(t Turn) Turn {
	t.Ahead = nil
	return t
}

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
	require.Equal(t, Turn{Present: true, Holds: true}, bare(ReadTurn(MutexTurn, children, names[0])))
	require.Equal(t, Turn{Present: true, Blocker: names[0], Last: true}, bare(ReadTurn(MutexTurn, children, names[1])),
		"behind the holder: its leaving is enough")
	require.Equal(t, Turn{Present: true, Blocker: names[1]}, bare(ReadTurn(MutexTurn, children, names[2])),
		"behind a waiter: look again when it goes")
	require.Equal(t, Turn{}, bare(ReadTurn(MutexTurn, children, lockNames(4)[0])), "absent")
}

// twoPermits is a semaphore rule of two permits, to show that the shared wait
// serves other primitives: the first two hold, the rest wait two places ahead.
func twoPermits(_ []Node, me int) (bool, int) {
	if me < 2 {
		return true, -1
	}
	return false, me - 2
}

func TestPureOtherRulesShareTheWait(t *testing.T) {
	children := lockNames(1, 2, 3, 4)
	names := children
	require.True(t, ReadTurn(twoPermits, children, names[1]).Holds)
	require.Equal(t, Turn{Present: true, Blocker: names[0], Last: true}, bare(ReadTurn(twoPermits, children, names[2])))
	require.Equal(t, Turn{Present: true, Blocker: names[1]}, bare(ReadTurn(twoPermits, children, names[3])),
		"when its blocker goes it is still third: look again")
}

// rwNames names a queue of readers ('r') and writers ('w') in the style of
// Curator or kazoo, alternating, with sequence numbers 1, 2, ...
func rwNames(kinds string) []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		style := CuratorWrite
		switch {
		case k == 'r' && i%2 == 0:
			style = CuratorRead
		case k == 'r':
			style = KazooRead
		case i%2 == 1:
			style = KazooWrite
		}
		out[i] = fmt.Sprintf("%s%010d", style.Prefix(fmt.Sprintf("%032d", i)), i+1)
	}
	return out
}

// rwRule is the rule a node of kind k follows.
func rwRule(k byte) Rule {
	if k == 'r' {
		return ReaderTurn
	}
	return MutexTurn
}

func TestPureReaderTurn(t *testing.T) {
	names := rwNames("rrwrrw")
	turnOf := func(i int) Turn { return bare(ReadTurn(rwRule("rrwrrw"[i]), names, names[i])) }
	assert.True(t, turnOf(0).Holds)
	assert.True(t, turnOf(1).Holds, "readers share")
	assert.Equal(t, Turn{Present: true, Blocker: names[1]}, turnOf(2), "a writer waits for the node just ahead")
	assert.Equal(t, Turn{Present: true, Blocker: names[2], Last: true}, turnOf(3), "a reader waits for the nearest writer only")
	assert.Equal(t, Turn{Present: true, Blocker: names[2], Last: true}, turnOf(4), "both readers behind the writer wait on it: its release frees both")
	assert.Equal(t, Turn{Present: true, Blocker: names[4]}, turnOf(5))
}

// Curator 5.5 downgrades a write lock with a plain ephemeral reader node
// numbered as the writer, made before the writer's node goes: a waiter that
// a reader blocks must list before holding when a Curator-named writer ahead
// leaves; a reader need not (readers share), and neither need anyone behind
// kazoo's writer, which has no downgrade.
func TestPureAWriterThatMayDowngradeIsNeverTheLastNodeAhead(t *testing.T) {
	names := rwNames("wwr") // Curator writer, kazoo writer, kazoo reader
	kazooBehind := bare(ReadTurn(MutexTurn, names, names[1]))
	assert.False(t, kazooBehind.Last, "a writer behind Curator's writer lists before holding")
	reader := append([]string{names[0]}, names[2])
	assert.True(t, bare(ReadTurn(ReaderTurn, reader, reader[1])).Last, "a reader behind a writer holds when it goes")
	behindKazoo := []string{names[1], fmt.Sprintf("%s%010d", CuratorWrite.Prefix(fmt.Sprintf("%032d", 9)), 3)}
	assert.True(t, bare(ReadTurn(MutexTurn, behindKazoo, behindKazoo[1])).Last, "kazoo's writer does not downgrade")

	twin := append(lockNames(1, 2), "_c_ffffffffffffffffffffffffffffffff-lock-0000000001")
	assert.False(t, ReadTurn(MutexTurn, twin, twin[1]).Last,
		"two nodes with one number: someone makes nodes with numbers of their own")
}

func TestPureJoinedAhead(t *testing.T) {
	nodes := Sorted(lockNames(1, 2, 3, 4))
	assert.False(t, SeenOf(nodes[:3]).JoinedAhead(nodes[:3]))
	assert.False(t, SeenOf(nodes[:3]).JoinedAhead([]Node{nodes[0], nodes[2]}), "leaving is not joining")
	assert.False(t, SeenOf(nodes[:3]).JoinedAhead(nil))
	stranger := Sorted(lockNames(2))[0]
	stranger.Name = "_c_ffffffffffffffffffffffffffffffff-lock-0000000002"
	assert.True(t, SeenOf(nodes[:3]).JoinedAhead([]Node{nodes[0], stranger, nodes[2]}), "a new name ahead")
	assert.True(t, SeenOf(nodes[1:3]).JoinedAhead(nodes[:3]), "a node ahead of all of them")
}

// FuzzRWTurn: in any queue of readers and writers, the holders are either
// readers only or one writer alone, the head always holds, and the rules
// are monotone (removing nodes ahead never turns a holder into a waiter).
func FuzzRWTurn(f *testing.F) {
	f.Add([]byte("rrwrrw"), uint64(0b101))
	f.Add([]byte("wrw"), uint64(1))
	f.Fuzz(func(t *testing.T, raw []byte, drop uint64) {
		if len(raw) == 0 || len(raw) > 40 {
			return
		}
		kinds := make([]byte, len(raw))
		for i, b := range raw {
			kinds[i] = "rw"[b&1]
		}
		holders := holdersOf(kinds)
		require.Contains(t, holders, 0, "the head holds")
		for _, i := range holders {
			if kinds[i] == 'w' {
				require.Equal(t, []int{0}, holders, "a writer holds alone: %s", kinds)
			}
		}
		// Drop the nodes whose bit is set: every holder left still holds.
		var kept []byte
		var keptIdx []int
		for i := range kinds {
			if drop&(1<<(i%64)) == 0 {
				kept, keptIdx = append(kept, kinds[i]), append(keptIdx, i)
			}
		}
		after := holdersOf(kept)
		for j, i := range keptIdx {
			if slices.Contains(holders, i) {
				require.Contains(t, after, j, "%s: node %d held before the removal", kinds, i)
			}
		}
	})
}

func holdersOf(kinds []byte) []int {
	names := rwNames(string(kinds))
	var out []int
	for i := range kinds {
		if ReadTurn(rwRule(kinds[i]), names, names[i]).Holds {
			out = append(out, i)
		}
	}
	return out
}

func TestPureNameHashIsFNV1a(t *testing.T) {
	for _, name := range []string{"", "a", "_c_0123456789abcdef0123456789abcdef-lock-0000000001"} {
		h := fnv.New64a()
		_, _ = h.Write([]byte(name))
		assert.Equal(t, h.Sum64(), nameHash(name), name)
	}
}
