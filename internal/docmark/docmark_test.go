package docmark

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPureReplaceBetweenMarkers(t *testing.T) {
	begin, end := Markers("prog")
	doc := "intro\n" + begin + "\nold\n" + end + "\noutro\n"
	got, err := Replace(doc, "prog", "\nnew\n")
	require.NoError(t, err)
	require.Equal(t, "intro\n"+begin+"\nnew\n"+end+"\noutro\n", got)
	again, err := Replace(got, "prog", "\nnewer\n")
	require.NoError(t, err)
	require.Equal(t, "intro\n"+begin+"\nnewer\n"+end+"\noutro\n", again, "idempotent markers")
	_, err = Replace(doc, "other", "x")
	require.Error(t, err, "another program's markers")
	_, err = Replace("no markers", "prog", "x")
	require.Error(t, err)
}
