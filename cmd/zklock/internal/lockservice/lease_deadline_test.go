package lockservice

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A keep-alive answered after a later one (its caller gave up waiting for
// it and sent the next) leaves the lease's deadline where the later one
// put it: moving it back would end the lease, and delete its locks, before
// the deadline its caller goes by.
func TestPureLeaseDeadlineNeverMovesBack(t *testing.T) {
	now := time.Now()
	l := &lease{ttl: time.Second, deadline: now.Add(time.Second)}
	l.extend(now.Add(-500 * time.Millisecond))
	require.Equal(t, now.Add(time.Second), l.deadline, "an older keep-alive answered late")
	l.extend(now.Add(200 * time.Millisecond))
	require.Equal(t, now.Add(1200*time.Millisecond), l.deadline)
}
