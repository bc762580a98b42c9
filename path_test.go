package zklock

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPureValidatePath(t *testing.T) {
	tests := []struct {
		path string
		ok   bool
	}{
		{"/locks/a", true},
		{"/a", true},
		{"/a/b/c", true},
		{"/locks/ünïcødé/日本語", true},
		{"/zookeeperx", true}, // only the /zookeeper subtree is reserved
		{"/a/zookeeper", true},
		{"/a/.hidden", true},
		{"/a/...", true},
		{"/a/b.c", true},
		{"/with space", true},

		{"", false},
		{"a/b", false},
		{"locks", false},
		{"/", false},
		{"/a/", false},
		{"//", false},
		{"//a", false},
		{"/a//b", false},
		{"/.", false},
		{"/..", false},
		{"/a/./b", false},
		{"/a/../b", false},
		{"/a/..", false},
		{"/a\x00b", false},
		{"/a\nb", false},
		{"/a\x1fb", false},
		{"/a\x7fb", false},
		{"/a\u0085b", false}, // C1 control
		{"/a\ue000b", false}, // private use
		{"/a\ufff0b", false},
		{"/a\xffb", false}, // not UTF-8: decodes to U+FFFD
		{"/zookeeper", false},
		{"/zookeeper/quota", false},
		{"/locks/\U0001F512", false}, // above U+FFFF: a surrogate pair, which ZooKeeper rejects
		{"/a/\U00010000/b", false},
	}
	for _, tt := range tests {
		err := validatePath(tt.path)
		if tt.ok {
			assert.NoError(t, err, "%q", tt.path)
		} else {
			assert.ErrorIs(t, err, ErrInvalidPath, "%q", tt.path)
		}
	}
}

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
		seq, ok := parseSeq(tt.name)
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
	for _, n := range sortedLockNodes(children) {
		names = append(names, n.name)
	}
	assert.Equal(t, []string{
		"zzzz__lock__0000000001",
		"_c_ffff-lock-0000000002",
		"aaaa__lock__0000000010",
		"_c_0000-lock-2147483647",
		"_c_bbbb-lock--2147483648",
	}, names)
	assert.Empty(t, sortedLockNodes([]string{"config", "leader"}))
	assert.Empty(t, sortedLockNodes(nil))
}

func TestPureAncestors(t *testing.T) {
	tests := []struct {
		path string
		want []string
	}{
		{"/a", nil},
		{"/a/b", []string{"/a"}},
		{"/a/b/c", []string{"/a", "/a/b"}},
		{"/locks/日本/x", []string{"/locks", "/locks/日本"}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, ancestors(tt.path), tt.path)
	}
}

// FuzzParseSeq: parseSeq never panics, reads back every name ZooKeeper can
// generate, and orders them by creation, across the 32-bit wrap.
func FuzzParseSeq(f *testing.F) {
	for _, n := range []int32{0, 1, 7, 999999999, 1<<31 - 1, -1 << 31, -1, -123} {
		f.Add("_c_0123456789abcdef0123456789abcdef", n, "")
	}
	f.Add("kazoo", int32(3), "x__lock__0000000003")
	f.Add("", int32(0), "x-lock-+000000001")
	f.Add("", int32(0), "-lock-")
	f.Fuzz(func(t *testing.T, prefix string, n int32, name string) {
		parseSeq(name) // arbitrary children must not panic

		for _, mk := range markers {
			node := prefix + mk.marker + fmt.Sprintf("%010d", n)
			got, ok := parseNode(node)
			require.True(t, ok, "%q", node)
			require.Equal(t, int64(uint32(n)), got.seq, "%q", node)
			require.Equal(t, mk.shared, got.shared, "%q", node)
		}
		// The next node sorts after this one, also across the wrap from
		// 2147483647 to -2147483648; only the second wrap, from -1 back to
		// 0 after 2^32 nodes, cannot be told apart.
		if n != -1 {
			a, _ := parseSeq("x-lock-" + fmt.Sprintf("%010d", n))
			b, _ := parseSeq("x-lock-" + fmt.Sprintf("%010d", n+1))
			require.Less(t, a, b, "n=%d", n)
		}
	})
}

// FuzzValidatePath: anything validatePath accepts is an absolute, normalised
// path outside /zookeeper that ZooKeeper's own check accepts too.
func FuzzValidatePath(f *testing.F) {
	for _, p := range []string{"/a", "/a/b", "", "/", "/a/", "//", "/./a", "/a/..", "/zookeeper", "/zookeeper/x",
		"/zookeeperx", "/a\x00", "/\u0085", "/\ud7ff", "/\uf900", "/日本", "/a\xff"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if validatePath(p) != nil {
			return
		}
		require.True(t, strings.HasPrefix(p, "/"), "%q", p)
		segs := strings.Split(p[1:], "/")
		require.NotEqual(t, "zookeeper", segs[0], "%q", p)
		for _, s := range segs {
			require.NotContains(t, []string{"", ".", ".."}, s, "%q", p)
		}
		require.True(t, zkAcceptsPath(p), "ZooKeeper would reject %q", p)
	})
}

// zkAcceptsPath is ZooKeeper's PathUtils.validatePath, which the server runs
// on every create. It looks at UTF-16 code units, as Java strings are, and
// the server decodes invalid UTF-8 to U+FFFD.
func zkAcceptsPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	if p == "/" {
		return true
	}
	if strings.HasSuffix(p, "/") {
		return false
	}
	chars := utf16.Encode([]rune(p))
	for i := 1; i < len(chars); i++ {
		c, last := chars[i], chars[i-1]
		end := i+1 == len(chars) || chars[i+1] == '/'
		switch {
		case c == 0:
			return false
		case c == '/' && last == '/':
			return false
		case c == '.' && last == '.' && chars[i-2] == '/' && end:
			return false
		case c == '.' && last == '/' && end:
			return false
		case c > 0 && c < 0x1f, c > 0x7f && c < 0x9f, c > 0xd800 && c < 0xf8ff, c > 0xfff0 && c < 0xffff:
			return false
		}
	}
	return true
}

// parseNodeByScan is parseNode as it was first written (the last marker
// anywhere in the name, then exactly the digits after it): the reference
// the faster parseNode must agree with.
func parseNodeByScan(name string) (lockNode, bool) {
	at, m, shared, marker := -1, 0, false, ""
	for _, mk := range markers {
		if i := strings.LastIndex(name, mk.marker); i > at {
			at, m, shared, marker = i, len(mk.marker), mk.shared, mk.marker
		}
	}
	if at < 0 {
		return lockNode{}, false
	}
	digits := name[at+m:]
	if len(digits) != seqDigits && !(len(digits) == seqDigits+1 && digits[0] == '-') {
		return lockNode{}, false
	}
	if strings.HasPrefix(digits, "+") {
		return lockNode{}, false // ZooKeeper never writes a plus sign
	}
	n, err := strconv.ParseInt(digits, 10, 32)
	if err != nil {
		return lockNode{}, false
	}
	return lockNode{name: name, seq: int64(uint32(int32(n))), shared: shared, marker: marker}, true
}

func FuzzParseNodeAgreesWithScan(f *testing.F) {
	for _, s := range []string{"_c_x-lock-0000000001", "x__lock__-2147483648", "a-lock-__READ__0000000009",
		"__rlock__0000000001", "x-lease--000000001", "x-lock-+000000001", "-lock-", "x-lock-00000000011", "0000000001"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		want, wok := parseNodeByScan(name)
		got, ok := parseNode(name)
		require.Equal(t, wok, ok, "%q", name)
		require.Equal(t, want, got, "%q", name)
	})
}
