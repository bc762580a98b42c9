package zklock

import (
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
