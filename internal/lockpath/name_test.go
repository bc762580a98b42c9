package lockpath

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPureParseSeq(t *testing.T) {
	tests := []struct {
		name string
		seq  int64
		ok   bool
	}{
		// go-zookeeper's zk.Lock and zklock: _c_<32 hex>-lock-<seq>.
		{"_c_0123456789abcdef0123456789abcdef-lock-0000000007", 7, true},
		// Curator: _c_<UUID with dashes>-lock-<seq>.
		{"_c_3f1a2b4c-5d6e-7f80-9a0b-1c2d3e4f5a6b-lock-0000000012", 12, true},
		// kazoo: <32 hex>__lock__<seq>.
		{"0123456789abcdef0123456789abcdef__lock__0000000003", 3, true},
		// Curator's LeaderLatch: _c_<UUID>-latch-<seq>.
		{"_c_3f1a2b4c-5d6e-7f80-9a0b-1c2d3e4f5a6b-latch-0000000004", 4, true},
		{"x-lock-0000000000", 0, true},
		{"x-lock-2147483647", 2147483647, true},
		// Past 2^31 ZooKeeper's signed counter prints negative numbers.
		{"x-lock--2147483648", 1 << 31, true},
		{"x-lock--000000001", 1<<32 - 1, true},
		// The last marker wins: a GUID may contain the other marker's text.
		{"a__lock__b-lock-0000000005", 5, true},
		{"a-lock-b__lock__0000000006", 6, true},

		{"", 0, false},
		{"config", 0, false},
		{"leader-0000000001", 0, false},
		{"x-lock-", 0, false},
		{"x-lock-000000007", 0, false},   // 9 digits
		{"x-lock-00000000007", 0, false}, // 11 digits
		{"x-lock-000000000a", 0, false},
		{"x-lock-0000000007x", 0, false},
		{"x-lock- 000000007", 0, false},
		{"x-lock--2147483649", 0, false}, // below int32
		{"x-lock-4294967295", 0, false},  // above int32
		{"x__lock__123", 0, false},
	}
	for _, tt := range tests {
		seq, ok := Seq(tt.name)
		assert.Equal(t, tt.ok, ok, "%q", tt.name)
		assert.Equal(t, tt.seq, seq, "%q", tt.name)
	}
}

func TestPureSortedLockNodes(t *testing.T) {
	children := []string{
		"_c_bbbb-lock--2147483648", // after the wrap: last
		"config",
		"aaaa__lock__0000000010",
		"_c_ffff-lock-0000000002",
		"leader",
		"_c_0000-lock-2147483647",
		"zzzz__lock__0000000001",
	}
	var names []string
	for _, n := range Sorted(children) {
		names = append(names, n.Name)
	}
	assert.Equal(t, []string{
		"zzzz__lock__0000000001",
		"_c_ffff-lock-0000000002",
		"aaaa__lock__0000000010",
		"_c_0000-lock-2147483647",
		"_c_bbbb-lock--2147483648",
	}, names)
	assert.Empty(t, Sorted([]string{"config", "leader"}))
	assert.Empty(t, Sorted(nil))
}

// FuzzParseSeq: Seq never panics, reads back every name ZooKeeper can
// generate, and orders them by creation, across the 32-bit wrap.
func FuzzParseSeq(f *testing.F) {
	for _, n := range []int32{0, 1, 7, 999999999, 1<<31 - 1, -1 << 31, -1, -123} {
		f.Add("_c_0123456789abcdef0123456789abcdef", n, "")
	}
	f.Add("kazoo", int32(3), "x__lock__0000000003")
	f.Add("", int32(0), "x-lock-+000000001")
	f.Add("", int32(0), "-lock-")
	f.Fuzz(func(t *testing.T, prefix string, n int32, name string) {
		Seq(name) // arbitrary children must not panic

		for _, mk := range markers {
			node := prefix + mk.marker + fmt.Sprintf("%010d", n)
			got, ok := Parse(node)
			require.True(t, ok, "%q", node)
			require.Equal(t, int64(uint32(n)), got.Seq, "%q", node)
			require.Equal(t, mk.shared, got.Shared, "%q", node)
		}
		// The next node sorts after this one, also across the wrap from
		// 2147483647 to -2147483648; only the second wrap, from -1 back to
		// 0 after 2^32 nodes, cannot be told apart.
		if n != -1 {
			a, _ := Seq("x-lock-" + fmt.Sprintf("%010d", n))
			b, _ := Seq("x-lock-" + fmt.Sprintf("%010d", n+1))
			require.Less(t, a, b, "n=%d", n)
		}
	})
}

// parseNodeByScan is Parse as it was first written (the last marker
// anywhere in the name, then exactly the digits after it): the reference
// the faster Parse must agree with.
func parseNodeByScan(name string) (Node, bool) {
	at, m, shared, marker := -1, 0, false, ""
	for _, mk := range markers {
		if i := strings.LastIndex(name, mk.marker); i > at {
			at, m, shared, marker = i, len(mk.marker), mk.shared, mk.marker
		}
	}
	if at < 0 {
		return Node{}, false
	}
	digits := name[at+m:]
	if len(digits) != seqDigits && !(len(digits) == seqDigits+1 && digits[0] == '-') {
		return Node{}, false
	}
	if strings.HasPrefix(digits, "+") {
		return Node{}, false // ZooKeeper never writes a plus sign
	}
	n, err := strconv.ParseInt(digits, 10, 32)
	if err != nil {
		return Node{}, false
	}
	return Node{Name: name, Seq: int64(uint32(int32(n))), Shared: shared, Marker: marker}, true
}

func FuzzParseNodeAgreesWithScan(f *testing.F) {
	for _, s := range []string{"_c_x-lock-0000000001", "x__lock__-2147483648", "a-lock-__READ__0000000009",
		"__rlock__0000000001", "x-lease--000000001", "x-lock-+000000001", "-lock-", "x-lock-00000000011", "0000000001"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		want, wok := parseNodeByScan(name)
		got, ok := Parse(name)
		require.Equal(t, wok, ok, "%q", name)
		require.Equal(t, want, got, "%q", name)
	})
}

// Every lock node name Parse reads makes its parent a lock path to the CLI's
// tree walk, and loses its GUID in the listings.
func TestPureShortAndIsLockPath(t *testing.T) {
	for name, short := range map[string]string{
		"_c_0123456789abcdef0123456789abcdef-lock-0000000001":      "lock-0000000001",
		"_c_3f1a2b4c-5d6e-7f80-9a0b-1c2d3e4f5a6b-latch-0000000002": "latch-0000000002",
		"_c_0123456789abcdef0123456789abcdef-lease-0000000003":     "lease-0000000003",
		"_c_0123456789abcdef0123456789abcdef-__READ__0000000004":   "__READ__0000000004",
		"_c_0123456789abcdef0123456789abcdef-__WRIT__0000000005":   "__WRIT__0000000005",
		"_c_0123456789abcdef0123456789abcdef-lock--000000001":      "lock--000000001",
		"0123456789abcdef__lock__0000000006":                       "0123456789abcdef__lock__0000000006",
		"0123456789abcdef__rlock__-2147483648":                     "0123456789abcdef__rlock__-2147483648",
	} {
		require.True(t, IsLockPath([]string{"config", name}), name)
		require.Equal(t, short, Short("/p/"+name))
		require.Equal(t, short, Short(name), "a bare name")
	}
	require.True(t, IsLockPath([]string{Turnstile, Leases}), "a semaphore's path")
	require.False(t, IsLockPath([]string{"config", Turnstile, "_c_x-lock-000000001"}))
	require.False(t, IsLockPath(nil))
	require.Equal(t, "_c_0123-config", Short("/p/_c_0123-config"), "not a lock node: whole")
}

// A downgraded reader's name sorts at the writer's place: Curator's reader
// marker, the writer's digits (a wrapped counter's too), the same sequence.
func TestPureAtPlaceOf(t *testing.T) {
	guid := fmt.Sprintf("%032x", 7)
	for _, writer := range []string{
		CuratorWrite.Prefix(fmt.Sprintf("%032x", 1)) + "0000000042",
		CuratorWrite.Prefix(fmt.Sprintf("%032x", 1)) + "-2147483648",
	} {
		name, ok := CuratorRead.AtPlaceOf(guid, writer)
		require.True(t, ok)
		assert.Equal(t, "_c_"+guid+"-__READ__"+writer[strings.LastIndex(writer, "__")+2:], name)
		w, _ := Parse(writer)
		r, ok := Parse(name)
		require.True(t, ok)
		assert.Equal(t, w.Seq, r.Seq)
		assert.True(t, r.Shared)
	}
	_, ok := CuratorRead.AtPlaceOf(guid, "foo")
	assert.False(t, ok)
	assert.True(t, CuratorWrite.Downgrades())
	assert.False(t, KazooWrite.Downgrades())
	assert.False(t, MutexStyle.Downgrades())
}
