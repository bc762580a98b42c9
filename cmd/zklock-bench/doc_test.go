package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPureReplaceBetween(t *testing.T) {
	doc := "intro\n" + docBegin + "\nold\n" + docEnd + "\noutro\n"
	got, err := replaceBetween(doc, "\nnew\n")
	require.NoError(t, err)
	require.Equal(t, "intro\n"+docBegin+"\nnew\n"+docEnd+"\noutro\n", got)
	again, err := replaceBetween(got, "\nnewer\n")
	require.NoError(t, err)
	require.Equal(t, "intro\n"+docBegin+"\nnewer\n"+docEnd+"\noutro\n", again, "idempotent markers")
	_, err = replaceBetween("no markers", "x")
	require.Error(t, err)
}
