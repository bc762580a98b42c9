package wire

import (
	"strings"
	"testing"
	"unicode/utf16"
)

// FuzzPathProblem: a path PathProblem accepts, ZooKeeper's own check accepts
// too (a sequential one once the server has appended its number).
func FuzzPathProblem(f *testing.F) {
	for _, p := range []string{"/a", "/a/b", "", "/", "/a/", "//", "/./a", "/a/..", "/a\x00", "/\u0085", "/\ud7ff", "/\uf900", "/日本", "/a\xff"} {
		f.Add(p, false)
		f.Add(p, true)
	}
	f.Fuzz(func(t *testing.T, p string, seq bool) {
		if PathProblem(p, seq) != "" {
			return
		}
		q := p
		if seq {
			q += "0000000001"
		}
		if !zkAcceptsPath(q) {
			t.Fatalf("PathProblem accepts %q (seq %v), which ZooKeeper rejects", p, seq)
		}
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
