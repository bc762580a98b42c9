package zklock

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock/internal/wire"
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
// path outside /zookeeper that ZooKeeper's client rule accepts too.
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
		// What ZooKeeper's own check accepts: FuzzPathProblem (internal/wire).
		require.Empty(t, wire.PathProblem(p, false), "%q", p)
	})
}
