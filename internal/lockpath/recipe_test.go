package lockpath

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Read parses each name once for the queue and the recipe check; it must
// say exactly what Sorted and a name-by-name recipe check say.
func FuzzReadAgreesWithSortedAndRecipes(f *testing.F) {
	f.Add("_c_0123-lock-0000000002,_c_0123-lock-0000000001", 0)
	f.Add("x-__READ__0000000003,y-__WRIT__0000000001,leases,locks", 1)
	f.Add("a__lock__0000000005,b__rlock__0000000004,junk", 2)
	f.Add("", 3)
	styles := []Style{MutexStyle, CuratorRead, CuratorWrite, KazooRead, KazooWrite, SemaphoreLease, LatchStyle}
	f.Fuzz(func(t *testing.T, list string, which int) {
		var children []string
		for _, c := range strings.Split(list, ",") {
			if c != "" { // ZooKeeper names a child with at least one character
				children = append(children, c)
			}
		}
		s := styles[(which%len(styles)+len(styles))%len(styles)]
		l := s.Read(children)
		require.Equal(t, Sorted(children), l.Nodes)
		name, r, bad := "", Recipe{}, false
		for _, c := range children {
			if rc := recipeOf(c); !joinable(s.joins(), rc) {
				name, r, bad = c, rc, true
				break
			}
		}
		require.Equal(t, bad, l.Foreign != "")
		require.Equal(t, name, l.Foreign)
		require.Equal(t, r, l.Recipe)
	})
}
