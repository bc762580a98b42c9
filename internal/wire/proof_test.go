package wire

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const ms = int64(time.Millisecond)

// grantedConn is a connection whose session was granted 1 s: ProofGap 300 ms.
func grantedConn() *wireConn {
	c := testConn()
	c.w.granted = time.Second
	c.w.current = c
	return c
}

// An answer is proven by a leader-completed request sent ProofGap after it
// came, and only then: a sync sent earlier may have been forwarded before
// the leader's next ping carried the answer's touch.
func TestPureProofNeedsTheGap(t *testing.T) {
	c := grantedConn()
	c.noteAnswer(90*ms, 100*ms, false) // a ping answered by whichever server
	assert.Zero(t, c.w.proven.at, "a server's own answer proves nothing")
	c.noteAnswer(350*ms, 360*ms, true) // sent 250 ms after the ping's answer
	assert.Zero(t, c.w.proven.at, "sent before the gap passed")
	c.noteAnswer(400*ms, 410*ms, true) // sent 300 ms after
	assert.Equal(t, 90*ms, c.w.proven.at, "the ping's send time is proven")
	c.noteAnswer(760*ms, 770*ms, true)
	assert.Equal(t, 400*ms, c.w.proven.at, "the sync at 400 ms, answered at 410 ms, proven by one sent at 760 ms")
}

// A reply carrying an error is no proof: a refused request may never have
// reached the leader.
func TestPureProofNotFromAnError(t *testing.T) {
	c := grantedConn()
	c.frames = 1 // past the connect response
	c.noteAnswer(5*ms, 6*ms, false)
	c.sent = []sentReq{{at: 400 * ms, byLeader: true}, {at: 410 * ms, byLeader: true}}
	require.NoError(t, c.parse(errorReply(1, -101))) // NoNode
	assert.Zero(t, c.w.proven.at, "an error reply proves nothing")
	require.NoError(t, c.parse(reply(2)))
	assert.Equal(t, 5*ms, c.w.proven.at, "the same request answered without an error does")
}

// A connect response proves its request at once: the leader made or
// revalidated the session before the server answered.
func TestPureProofFromTheConnect(t *testing.T) {
	c := testConn(70 * ms)
	c.wrote = false
	require.NoError(t, c.parse(connectResponse(1000, 1)))
	assert.Equal(t, 70*ms, c.w.proven.at)
	c = testConn(70 * ms)
	require.NoError(t, c.parse(connectResponse(0, 0)))
	assert.Zero(t, c.w.proven.at, "a refused session proves nothing")
}

// Only a write or a sync counts as the leader's: reads and pings are answered
// by any server.
func TestPureProofLeaderOps(t *testing.T) {
	for op, want := range map[int32]bool{zkOpSync: true, zkOpCreate: true, zkOpCreate2: true, zkOpDelete: true,
		zkOpSetData: true, zkOpMulti: true, zkOpGetData: false, zkOpExists: false, zkOpGetChildren2: false,
		zkOpMultiRead: false, -11: false, 11: false, zkOpSetWatches: false} {
		assert.Equal(t, want, leaderOp(op), "opcode %d", op)
	}
	c := &wireConn{Conn: &scriptedConn{}, w: New(Config{})}
	for _, op := range []int32{0, zkOpSync, zkOpGetData} { // the connect request first
		p := binary.BigEndian.AppendUint32(nil, 8)
		p = binary.BigEndian.AppendUint32(p, 1)
		p = binary.BigEndian.AppendUint32(p, uint32(op))
		_, err := c.Write(p)
		require.NoError(t, err)
	}
	require.Len(t, c.sent, 3)
	assert.Equal(t, []bool{false, true, false}, []bool{c.sent[0].byLeader, c.sent[1].byLeader, c.sent[2].byLeader})
}

// A busy connection keeps a few answers per gap, and none older than the
// session timeout: they could not extend a deadline any more.
func TestPureProofBounded(t *testing.T) {
	c := grantedConn()
	for i := range int64(10_000) {
		c.noteAnswer(i*ms/10, i*ms/10+ms, false) // ten answers a millisecond
	}
	assert.LessOrEqual(t, len(c.unproven), 30)
	assert.GreaterOrEqual(t, c.unproven[0].done, int64(1000*ms)-int64(time.Second))
	due, ok := c.w.ProofDue()
	require.True(t, ok)
	assert.Equal(t, c.w.epoch.Add(time.Duration(c.unproven[0].done+300*ms)), due)
	c.w.current = nil
	_, ok = c.w.ProofDue()
	assert.False(t, ok, "no connection: nothing to send a sync on")
}

// The loss clock waiting for contact is woken by a proof, not by an answer.
func TestPureProofWakesTheClock(t *testing.T) {
	c := grantedConn()
	c.w.WatchLeaderContact(c.w.epoch)
	c.noteAnswer(10*ms, 20*ms, false)
	select {
	case <-c.w.rearm:
		t.Fatal("woken by a follower's answer")
	default:
	}
	c.noteAnswer(320*ms, 330*ms, true)
	select {
	case <-c.w.rearm:
	default:
		t.Fatal("not woken by the proof")
	}
}

// errorReply is a reply header with error code code.
func errorReply(xid, code int32) []byte {
	p := binary.BigEndian.AppendUint32(nil, uint32(xid))
	p = binary.BigEndian.AppendUint64(p, 42)
	p = binary.BigEndian.AppendUint32(p, uint32(code))
	return frameOf(p)
}

// The server answers an auth request at once, ahead of requests still in its
// pipeline: its reply must not be taken for the sync sent before it, which a
// cut-off follower never completes.
func TestPureProofAuthReplyOvertakesASync(t *testing.T) {
	c := grantedConn()
	c.frames = 1
	c.noteAnswer(90*ms, 100*ms, false)
	c.sent = []sentReq{{at: 400 * ms, xid: 7, byLeader: true}, {at: 410 * ms, xid: 8}} // a sync, then an auth
	require.NoError(t, c.parse(reply(8)))
	assert.Zero(t, c.w.proven.at, "the auth's answer proves nothing")
	assert.Equal(t, []int64{400 * ms}, sentTimes(c), "the sync is still outstanding")
	require.NoError(t, c.parse(reply(7)))
	assert.Equal(t, 90*ms, c.w.proven.at, "the sync's own answer does")
}

// A new session starts the leader's word afresh (a lease of the old one is
// kept by no proof of the new one), and within a session the smallest grant
// counts: a new leader restores the session with the timeout it was made with.
func TestPureProofPerSession(t *testing.T) {
	c := testConn(50 * ms)
	c.wrote = false
	require.NoError(t, c.parse(connectResponse(4000, 1)))
	proven, session := c.w.LeaderContact()
	assert.Equal(t, c.w.epoch.Add(50*time.Millisecond), proven)
	assert.Equal(t, int64(1), session)

	c2 := &wireConn{w: c.w, sent: []sentReq{{at: 70 * ms}}}
	require.NoError(t, c2.parse(connectResponse(10000, 1)))
	assert.Equal(t, 4*time.Second, c.w.granted, "the session's smallest grant")
	c3 := &wireConn{w: c.w, sent: []sentReq{{at: 60 * ms}}}
	require.NoError(t, c3.parse(connectResponse(10000, 2)))
	assert.Equal(t, 10*time.Second, c.w.granted, "a new session's own grant")
	proven, session = c.w.LeaderContact()
	assert.Equal(t, c.w.epoch.Add(60*time.Millisecond), proven, "a new session's proof, though older than the last one's")
	assert.Equal(t, int64(2), session)
}

// Diagnose (Connect's error) and the reply parser take the Tap's and a
// connection's locks; they must not wait on each other.
func TestPureDiagnoseWhileRepliesArrive(t *testing.T) {
	w := New(Config{})
	c := &wireConn{w: w, wrote: true, frames: 1}
	w.conns[c] = struct{}{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 20_000 {
			c.mu.Lock()
			c.sent = append(c.sent, sentReq{at: 1})
			c.mu.Unlock()
			_ = c.parse(reply(1))
		}
	}()
	for range 20_000 {
		_ = w.Diagnose()
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Diagnose and the parser deadlocked")
	}
}
