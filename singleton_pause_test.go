package zklock

import (
	"slices"
	"testing"
	"time"
)

func TestPureSingletonPauses(t *testing.T) {
	const session = 4 * time.Second
	var got []time.Duration
	var pause time.Duration
	for i := 0; i < 8; i++ {
		pause = nextPause(pause, 0, session) // leases that end at once
		got = append(got, pause)
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
		1600 * time.Millisecond, 3200 * time.Millisecond, session, session}
	if !slices.Equal(got, want) {
		t.Fatalf("pauses %v, want %v", got, want)
	}
	if p := nextPause(session, session, session); p != 0 {
		t.Fatalf("a lease held a session timeout resets the pause; got %v", p)
	}
}
