package zklock

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The session state machine: where each observation takes each state.
func TestPureSessionStateMoves(t *testing.T) {
	tests := []struct{ from, seen, want SessionState }{
		{StateConnecting, StateConnected, StateConnected},
		{StateConnecting, StateSuspended, StateConnecting}, // no session to suspend
		{StateConnected, StateSuspended, StateSuspended},
		{StateConnected, StateLost, StateLost}, // a stall: no drop seen first
		{StateSuspended, StateLost, StateLost},
		{StateSuspended, StateConnected, StateReconnected},
		{StateLost, StateSuspended, StateLost}, // a drop after the loss changes nothing
		{StateLost, StateConnected, StateReconnected},
		{StateLost, StateExpired, StateExpired},
		{StateExpired, StateLost, StateExpired},
		{StateExpired, StateSuspended, StateExpired},
		{StateExpired, StateConnected, StateReconnected},
		{StateReconnected, StateConnected, StateReconnected},
		{StateReconnected, StateSuspended, StateSuspended},
		{StateClosed, StateConnected, StateClosed},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, move(tt.from, tt.seen), "%v seeing %v", tt.from, tt.seen)
	}
}
