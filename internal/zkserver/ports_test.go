package zkserver

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// Ports come from below the kernel's ephemeral range, reserved: a second
// reservation of a held port fails until the first is released, and a
// port some socket holds is never handed out.
func TestPurePortsBelowTheEphemeralRangeAndReserved(t *testing.T) {
	if low, high := portRange(); low != 0 {
		require.Equal(t, 10000, low)
		require.LessOrEqual(t, high, 61000, "the ephemeral range's start")
	}
	const low, high = 20000, 30000
	lk, l, err := takePort(low, high)
	require.NoError(t, err)
	require.GreaterOrEqual(t, lk.port, low)
	require.Less(t, lk.port, high)
	l.Close()
	_, ok := reservePort(lk.port)
	require.False(t, ok, "a reserved port reserved twice")
	lk.release()
	again, ok := reservePort(lk.port)
	require.True(t, ok, "a released port stays reserved")
	again.release()

	// A port a listener holds is skipped, reserved or not.
	busy, err := net.Listen("tcp", ":"+strconv.Itoa(lk.port))
	require.NoError(t, err)
	defer busy.Close()
	for range 50 {
		p, l, err := takePort(lk.port, lk.port+1)
		if err == nil {
			l.Close()
			p.release()
		}
		require.Error(t, err, "a busy port handed out")
	}
}
