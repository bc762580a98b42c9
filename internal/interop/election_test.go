package interop

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock"
)

// outLine reads the driver's next OUT line.
func outLine(t *testing.T, p *proc) string {
	t.Helper()
	select {
	case line := <-p.out:
		return line
	case err := <-p.done:
		t.Fatalf("%s ended before printing: %v", p.name, err)
	case <-time.After(60 * time.Second):
		t.Fatalf("%s printed nothing", p.name)
	}
	return ""
}

func nextLeader(t *testing.T, ch <-chan zklock.Leader) zklock.Leader {
	t.Helper()
	select {
	case ld := <-ch:
		return ld
	case <-time.After(60 * time.Second):
		t.Fatal("no leader change observed")
	}
	return zklock.Leader{}
}

// An election path shared with Curator's LeaderSelector: zklock reports
// Curator's leader with its participant id, zklock's campaign follows it in
// the queue, and Curator's getLeader reports zklock's leader (its id is
// zklock's owner record, which carries the value).
func TestElectionWithCuratorLeaderSelector(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	p := newPath(t)
	rec := &record{}
	c := zklockClient(t)
	e, err := c.NewElection(p)
	require.NoError(t, err)
	changes := e.Observe(context.Background())
	assert.Equal(t, zklock.Leader{}, nextLeader(t, changes))

	cur := startJava(t, rec, "curator", p, "leader:curator-1", 1, 1500)
	<-cur.acquired
	ld, err := e.Leader(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "curator-1", ld.Value, "Curator's participant id")
	assert.Equal(t, ld, nextLeader(t, changes))

	won := make(chan *zklock.Leadership, 1)
	go func() {
		l, err := e.Campaign(context.Background(), "zklock-1")
		assert.NoError(t, err)
		won <- l
	}()
	cur.wait(t) // Curator's leadership ends after its hold
	l := <-won
	require.NotNil(t, l)
	got := nextLeader(t, changes)
	for got.Node == "" { // Curator left before zklock's node was listed
		got = nextLeader(t, changes)
	}
	assert.Equal(t, l.Lease().Node(), got.Node)
	assert.Equal(t, "zklock-1", got.Value)

	curatorSeesZklockLeader(t, rec, p, "leaderof", "zklock-1")
	require.NoError(t, l.Resign(context.Background()))
}

// zklock's Campaign and Curator's LeaderSelector, both cycling on one path:
// never two leaders at once.
func TestElectionExcludesCuratorLeaders(t *testing.T) {
	t.Parallel()
	excludesCuratorLeaders(t, "leader:curator")
}

// Revocation across libraries: a zklock holder hears Curator's
// Revoker.attemptRevoke, and a Curator holder made revocable hears zklock's
// AskToRelease and releases.
func TestRevocationWithCurator(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	t.Run("curator asks zklock", func(t *testing.T) {
		p := newPath(t)
		m, err := zklockClient(t).NewMutex(p)
		require.NoError(t, err)
		l, err := m.Acquire(context.Background())
		require.NoError(t, err)
		_, _ = l.Token(context.Background())
		asker := startJava(t, &record{}, "revoker", p, "revoke:"+l.Node(), 0, 0)
		assert.Equal(t, "SENT", outLine(t, asker))
		asker.wait(t)
		select {
		case <-l.RevokeRequested():
		case <-time.After(30 * time.Second):
			t.Fatal("zklock's holder never heard Curator's request")
		}
		require.NoError(t, l.Release(context.Background()))
	})
	t.Run("zklock asks curator", func(t *testing.T) {
		p := newPath(t)
		holder := startJava(t, &record{}, "curator", p, "revocable", 1, 0)
		<-holder.acquired
		c := zklockClient(t)
		cs, err := c.Contenders(context.Background(), p)
		require.NoError(t, err)
		require.Len(t, cs, 1)
		require.NoError(t, c.AskToRelease(context.Background(), cs[0].Node))
		assert.Equal(t, "REVOKED", outLine(t, holder))
		holder.wait(t)
		waitChildren(t, observer(t), p, 0)
	})
}

// An election path shared with Curator's LeaderLatch, zklock naming its
// nodes as LeaderLatch does (LatchNames): zklock reports Curator's leader
// with its participant id and queues behind it, and Curator's getLeader
// reports zklock's leader.
func TestElectionWithCuratorLeaderLatch(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	p := newPath(t)
	rec := &record{}
	e, err := zklockClient(t).NewElection(p, zklock.LatchNames())
	require.NoError(t, err)

	cur := startJava(t, rec, "curator", p, "latch:curator-1", 1, 1500)
	<-cur.acquired
	ld, err := e.Leader(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "curator-1", ld.Value, "Curator's participant id")
	assert.Contains(t, ld.Node, "-latch-")

	won := make(chan *zklock.Leadership, 1)
	go func() {
		l, err := e.Campaign(context.Background(), "zklock-1")
		assert.NoError(t, err)
		won <- l
	}()
	cur.wait(t) // Curator's latch closes after its hold
	l := <-won
	require.NotNil(t, l)

	curatorSeesZklockLeader(t, rec, p, "latchof", "zklock-1")
	require.NoError(t, l.Resign(context.Background()))
}

// zklock's Campaign with LatchNames and Curator's LeaderLatch, both cycling
// on one path: never two leaders at once.
func TestElectionExcludesCuratorLatchLeaders(t *testing.T) {
	t.Parallel()
	excludesCuratorLeaders(t, "latch:curator", zklock.LatchNames())
}

// excludesCuratorLeaders cycles zklock's campaigns (with opts) and Curator's
// driver of kind on one path and checks that their leaderships never
// overlap.
func excludesCuratorLeaders(t *testing.T, kind string, opts ...zklock.ElectionOption) {
	requirePeers(t)
	p := newPath(t)
	rec := &record{}
	e, err := zklockClient(t).NewElection(p, opts...)
	require.NoError(t, err)
	cur := startJava(t, rec, "curator", p, kind, cycles, holdMs)
	cur.waitReady(t)
	g := runGo(rec, "zklock", false, cycles, holdMs*time.Millisecond, func() (func() error, error) {
		l, err := e.Campaign(context.Background(), "zklock")
		if err != nil {
			return nil, err
		}
		return func() error { return l.Resign(context.Background()) }, nil
	})
	cur.wait(t)
	g.wait(t)
	checkExclusive(t, rec, map[string]int{"curator": cycles, "zklock": cycles})
}

// curatorSeesZklockLeader runs Curator's driver of kind (leaderof, latchof)
// and checks that it reports zklock's leader, whose id is zklock's owner
// record carrying value.
func curatorSeesZklockLeader(t *testing.T, rec *record, p, kind, value string) {
	t.Helper()
	of := startJava(t, rec, kind, p, kind, 0, 0)
	line := outLine(t, of)
	assert.True(t, strings.HasPrefix(line, "LEADER {"), line)
	assert.Contains(t, line, `"value":"`+value+`"`)
	assert.True(t, strings.HasSuffix(line, " true"), line)
	of.wait(t)
}
