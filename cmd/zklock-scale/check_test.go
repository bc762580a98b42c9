package main

import (
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPureCheckCatchesInjectedOverlap(t *testing.T) {
	clean := []record{
		{Path: 1, Kind: kindMutex, Grant: 10, Release: 20},
		{Path: 1, Kind: kindMutex, Grant: 20, Release: 30}, // at the release's instant: no overlap
		{Path: 2, Kind: kindMutex, Grant: 15, Release: 25}, // another path
	}
	require.Empty(t, checkExclusion(clean, 3))
	injected := append(clean, record{Path: 1, Kind: kindMutex, Grant: 29, Release: 40})
	v := checkExclusion(injected, 3)
	require.Len(t, v, 1)
	assert.Equal(t, int32(1), v[0].Path)
	assert.Equal(t, int64(29), v[0].At)
}

func TestPureCheckTable(t *testing.T) {
	h := func(k kind, g, r int64) record { return record{Path: 7, Kind: k, Grant: g, Release: r} }
	for _, tc := range []struct {
		name string
		recs []record
		bad  int
	}{
		{"readers share", []record{h(kindRead, 0, 10), h(kindRead, 5, 15), h(kindRead, 6, 7)}, 0},
		{"writer after readers", []record{h(kindRead, 0, 10), h(kindRead, 5, 15), h(kindWrite, 15, 20)}, 0},
		{"writer beside a reader", []record{h(kindRead, 0, 10), h(kindWrite, 9, 20)}, 1},
		{"reader beside a writer", []record{h(kindWrite, 0, 10), h(kindRead, 3, 4)}, 1},
		{"two writers", []record{h(kindWrite, 0, 10), h(kindWrite, 3, 12)}, 1},
		{"three permits", []record{h(kindPermit, 0, 10), h(kindPermit, 1, 10), h(kindPermit, 2, 10)}, 0},
		{"four permits", []record{h(kindPermit, 0, 10), h(kindPermit, 1, 10), h(kindPermit, 2, 10), h(kindPermit, 9, 11)}, 1},
		{"permits in turn", []record{h(kindPermit, 0, 10), h(kindPermit, 1, 10), h(kindPermit, 2, 10), h(kindPermit, 10, 11)}, 0},
		{"mutex inside mutex", []record{h(kindMutex, 0, 100), h(kindMutex, 10, 20), h(kindMutex, 30, 40)}, 2},
		{"empty", nil, 0},
	} {
		assert.Len(t, checkExclusion(tc.recs, 3), tc.bad, tc.name)
	}
}

// FuzzPureCheck builds a valid schedule of holdings on one path from the
// fuzzer's bytes (each holding starts at or after the one before it ends),
// checks it is clean, then moves one grant back into its predecessor and
// checks that this is caught.
func FuzzPureCheck(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6}, uint8(2))
	f.Add([]byte{9, 0, 0, 1}, uint8(1))
	f.Fuzz(func(t *testing.T, gaps []byte, at uint8) {
		if len(gaps) < 4 {
			return
		}
		var recs []record
		var now int64
		for i := 0; i+1 < len(gaps); i += 2 {
			g := now + int64(gaps[i])
			now = g + int64(gaps[i+1]) + 1
			recs = append(recs, record{Path: 3, Kind: kindMutex, Grant: g, Release: now})
		}
		require.Empty(t, checkExclusion(recs, 3))
		i := 1 + int(at)%(len(recs)-1)
		recs[i].Grant = recs[i-1].Release - 1
		require.NotEmpty(t, checkExclusion(recs, 3))
	})
}

func TestPureRecordsRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	recs := make([]record, 1000)
	for i := range recs {
		recs[i] = record{Path: r.Int32(), Kind: kind(r.IntN(int(numKinds))), Call: r.Int64(), Grant: r.Int64(), Release: r.Int64()}
	}
	file := filepath.Join(t.TempDir(), "w.bin")
	require.NoError(t, writeRecords(file, recs))
	got, err := readRecords(file)
	require.NoError(t, err)
	require.Equal(t, recs, got)
}

func TestPureHandoffs(t *testing.T) {
	recs := []record{
		{Path: 1, Call: 0, Grant: 0, Release: 10},
		{Path: 1, Call: 5, Grant: 12, Release: 20},  // waited for the first: 2
		{Path: 1, Call: 30, Grant: 31, Release: 40}, // came after: no wait
		{Path: 2, Call: 6, Grant: 50, Release: 60},  // nothing released on path 2 before
	}
	assert.Equal(t, []int64{-1, 2, -1, -1}, handoffs(recs))
	s := summarise(recs, time.Second)
	require.Len(t, s, 2, "all, mutex")
	assert.Equal(t, 1, s[0].Handoffs)
	assert.InDelta(t, 2e-6, s[0].HandoffP50, 1e-9)
	assert.Equal(t, 4, s[1].Acquired)
}
