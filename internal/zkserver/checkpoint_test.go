//go:build linux

package zkserver

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPureCopySparseKeepsBytesAndHoles copies a file shaped like a
// preallocated transaction log (data, a hole, a last byte) and an all-hole
// one: the bytes are equal, and on Linux the copy's holes stay holes.
func TestPureCopySparseKeepsBytesAndHoles(t *testing.T) {
	dir := t.TempDir()
	for name, writes := range map[string]map[int64][]byte{
		"log":   {0: bytes.Repeat([]byte("txn"), 5000), 4<<20 - 1: {0}},
		"holes": {},
		"empty": nil,
	} {
		src := filepath.Join(dir, name)
		f, err := os.Create(src)
		require.NoError(t, err)
		for off, b := range writes {
			_, err := f.WriteAt(b, off)
			require.NoError(t, err)
		}
		if name == "holes" {
			require.NoError(t, f.Truncate(1<<20))
		}
		require.NoError(t, f.Close())

		dst := filepath.Join(dir, name+".copy")
		require.NoError(t, copySparse(src, dst))
		want, err := os.ReadFile(src)
		require.NoError(t, err)
		got, err := os.ReadFile(dst)
		require.NoError(t, err)
		require.True(t, bytes.Equal(want, got), name)
		if runtime.GOOS == "linux" {
			var st syscall.Stat_t
			require.NoError(t, syscall.Stat(dst, &st))
			require.Less(t, st.Blocks*512, int64(1<<20), "%s: the holes were written", name)
		}
	}
}
