package wire

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Frames as a ZooKeeper server sends them: a 4-byte big-endian length, then
// the payload.

func frameOf(payload []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(payload))), payload...)
}

// connectResponse is the first frame on a connection: protocol version,
// granted timeout (ms), session id, password, read-only flag. A refused
// (expired) session gets timeout 0 and session id 0.
func connectResponse(timeoutMs int32, session int64) []byte {
	p := binary.BigEndian.AppendUint32(nil, 0)
	p = binary.BigEndian.AppendUint32(p, uint32(timeoutMs))
	p = binary.BigEndian.AppendUint64(p, uint64(session))
	p = binary.BigEndian.AppendUint32(p, 16)
	p = append(p, make([]byte, 16)...)
	return frameOf(append(p, 0))
}

// reply is a reply header (xid, zxid, error) and a body.
func reply(xid int32, body ...byte) []byte {
	p := binary.BigEndian.AppendUint32(nil, uint32(xid))
	p = binary.BigEndian.AppendUint64(p, 42)
	p = binary.BigEndian.AppendUint32(p, 0)
	return frameOf(append(p, body...))
}

// notification is a watch event: xid -1, sent without any request.
func notification(path string) []byte {
	body := binary.BigEndian.AppendUint32(nil, 3) // NodeDataChanged
	body = binary.BigEndian.AppendUint32(body, 3) // SyncConnected
	body = binary.BigEndian.AppendUint32(body, uint32(len(path)))
	return reply(-1, append(body, path...)...)
}

func join(frames ...[]byte) []byte {
	var out []byte
	for _, f := range frames {
		out = append(out, f...)
	}
	return out
}

// testConn is a wireConn whose requests were sent at the given times (ns
// since the wire's epoch), oldest first.
func testConn(sent ...int64) *wireConn {
	c := &wireConn{w: New(Config{}), wrote: true}
	for _, at := range sent {
		c.sent = append(c.sent, sentReq{at: at})
	}
	return c
}

// sentTimes is when c's unanswered requests were sent, oldest first.
func sentTimes(c *wireConn) []int64 {
	times := []int64{}
	for _, r := range c.sent {
		times = append(times, r.at)
	}
	return times
}

// wireState is what parsing decides; two parses of one stream must agree on
// it however the stream was cut into reads.
type wireState struct {
	sent     []int64
	lenBytes []byte
	left     int64
	head     []byte
	handled  bool
	frames   int
	contact  int64
	granted  time.Duration
}

func stateOf(c *wireConn) wireState {
	return wireState{
		sent:     sentTimes(c),
		lenBytes: append([]byte{}, c.lenBuf[:c.lenN]...),
		left:     c.left,
		head:     append([]byte{}, c.head[:c.headN]...),
		handled:  c.handled,
		frames:   c.frames,
		contact:  c.w.heard.at,
		granted:  c.w.granted,
	}
}

// parseCut parses stream in reads ending at the given offsets. Like Read, it
// stops at the first error: the connection is closed then.
func parseCut(c *wireConn, stream []byte, cuts ...int) error {
	start := 0
	for _, end := range append(cuts, len(stream)) {
		if err := c.parse(stream[start:end]); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// parseBytes parses stream one byte per read.
func parseBytes(c *wireConn, stream []byte) error {
	cuts := make([]int, len(stream))
	for i := range cuts {
		cuts[i] = i
	}
	return parseCut(c, stream, cuts...)
}

// typicalExchange is a typical exchange: connect, two replies with a watch
// event between them, a ping reply (xid -2), and a reply with a large body;
// the sixth request is still unanswered.
func typicalExchange() (stream []byte, sent []int64) {
	stream = join(
		connectResponse(4000, 0x1234),
		reply(1, 0, 0, 0, 0),
		notification("/locks/a"),
		reply(2),
		reply(-2),
		reply(3, make([]byte, 300)...),
	)
	return stream, []int64{10, 20, 30, 40, 50, 60}
}

func TestPureWireConnectResponseGrantsTimeout(t *testing.T) {
	c := testConn(10)
	require.NoError(t, c.parse(connectResponse(4000, 0x1234)))
	assert.Equal(t, 4*time.Second, c.w.granted)
	assert.Equal(t, int64(10), c.w.heard.at, "the connect request was answered")
	assert.Empty(t, c.sent)
}

func TestPureWireRefusedSessionKeepsGrant(t *testing.T) {
	for _, timeout := range []int32{0, -1} {
		c := testConn(10, 20)
		c.w.granted = 6 * time.Second // from the connection before
		require.NoError(t, c.parse(connectResponse(timeout, 0)))
		assert.Equal(t, 6*time.Second, c.w.granted, "timeout %d", timeout)
		// The refused connect still consumed its send time, so any reply
		// after it lines up with its own request.
		assert.Equal(t, []int64{20}, sentTimes(c), "timeout %d", timeout)
		assert.Zero(t, c.w.heard.at, "timeout %d: a refused session is no news of a live one", timeout)
	}
}

func TestPureWireRepliesAdvanceContact(t *testing.T) {
	c := testConn(10, 20, 30, 40)
	require.NoError(t, c.parse(connectResponse(4000, 1)))
	for i, want := range []int64{20, 30, 40} {
		require.NoError(t, c.parse(reply(int32(i+1))))
		assert.Equal(t, want, c.w.heard.at, "reply %d answers the request sent at %d", i+1, want)
	}
	require.NoError(t, c.parse(reply(4))) // nothing outstanding: must not panic or move contact
	assert.Equal(t, int64(40), c.w.heard.at)
}

// The wire wakes the loss clock when a grant arrives or changes (a nap
// computed before may outlast the deadline), and on the first answer after
// the clock asked to hear of resumed contact; not otherwise.
func TestPureWireWakesTheLossClock(t *testing.T) {
	woken := func(c *wireConn) bool {
		select {
		case <-c.w.rearm:
			return true
		default:
			return false
		}
	}
	c := testConn(10, 20, 30, 40, 50)
	require.NoError(t, c.parse(connectResponse(2000, 1)))
	assert.True(t, woken(c), "the first grant")
	require.NoError(t, c.parse(reply(1)))
	assert.False(t, woken(c), "an answer nobody watches for")
	c.w.WatchContact(c.w.epoch.Add(20))
	assert.False(t, woken(c), "no answer since")
	require.NoError(t, c.parse(reply(2)))
	assert.True(t, woken(c), "contact resumed")
	require.NoError(t, c.parse(reply(3)))
	assert.False(t, woken(c), "one wake-up per watch")
	c.w.WatchContact(c.w.epoch.Add(20))
	assert.True(t, woken(c), "an answer came after what the clock saw: at once")

	c = testConn(10, 20)
	c.w.granted = 2 * time.Second
	require.NoError(t, c.parse(connectResponse(2000, 1)))
	assert.False(t, woken(c), "the same grant again")
	c = testConn(10)
	c.w.granted = 10 * time.Second
	require.NoError(t, c.parse(connectResponse(2000, 1)))
	assert.True(t, woken(c), "a smaller grant")
}

func TestPureWireNotificationsAnswerNothing(t *testing.T) {
	c := testConn(10, 20)
	require.NoError(t, c.parse(join(connectResponse(4000, 1), notification("/a"), notification("/b"))))
	assert.Equal(t, int64(10), c.w.heard.at)
	assert.Equal(t, []int64{20}, sentTimes(c), "a watch event must not pop a send time")
	require.NoError(t, c.parse(reply(1)))
	assert.Equal(t, int64(20), c.w.heard.at)
}

func TestPureWireSeveralFramesInOneRead(t *testing.T) {
	stream, sent := typicalExchange()
	c := testConn(sent...)
	require.NoError(t, c.parse(stream))
	assert.Equal(t, 6, c.frames)
	assert.Equal(t, int64(50), c.w.heard.at, "four requests answered after the connect")
	assert.Equal(t, []int64{60}, sentTimes(c))
	assert.Equal(t, 4*time.Second, c.w.granted)
	assert.Zero(t, c.left)
	assert.Zero(t, c.lenN)
}

func TestPureWireFrameSplitAtEveryBoundary(t *testing.T) {
	stream, sent := typicalExchange()
	whole := testConn(sent...)
	require.NoError(t, whole.parse(stream))
	want := stateOf(whole)
	for cut := 0; cut <= len(stream); cut++ {
		c := testConn(sent...)
		require.NoError(t, parseCut(c, stream, cut))
		require.Equal(t, want, stateOf(c), "stream cut at byte %d", cut)
	}
	c := testConn(sent...)
	require.NoError(t, parseBytes(c, stream))
	require.Equal(t, want, stateOf(c), "one byte per read")
}

// A server that is not ZooKeeper is refused on its first frame, before
// go-zookeeper believes a length read from, say, an HTTP reply and allocates it.
func TestPureWireRefusesNonZooKeeper(t *testing.T) {
	for _, stream := range [][]byte{
		[]byte("HTTP/1.1 400 Bad Request\r\n\r\n"),
		frameOf(nil),
		frameOf(make([]byte, 1000)),
		reply(1), // a reply before any connect response: too short
	} {
		w := New(Config{})
		c := &wireConn{Conn: &scriptedConn{in: stream, chunk: 64}, w: w}
		_, err := c.Write([]byte("connect"))
		require.NoError(t, err)
		_, err = c.Read(make([]byte, 64))
		require.ErrorIs(t, err, errNotZooKeeper, "%q", stream)
		assert.ErrorIs(t, w.lastError(), errNotZooKeeper)
		_, granted := w.LastContact()
		assert.Zero(t, granted)
	}
	// ZooKeeper before 3.4 leaves out the read-only byte: 36 bytes, not 37.
	old := connectResponse(4000, 1)
	old = frameOf(old[4 : len(old)-1])
	c := testConn(10)
	require.NoError(t, c.parse(old))
	assert.Equal(t, 4*time.Second, c.w.granted)
}

// The Read and Write wrappers feed the same bookkeeping as parse.
func TestPureWireConnReadWrite(t *testing.T) {
	stream, _ := typicalExchange()
	w := New(Config{})
	c := &wireConn{Conn: &scriptedConn{in: stream, chunk: 7}, w: w}
	for range 6 {
		_, err := c.Write([]byte("request"))
		require.NoError(t, err)
	}
	require.Equal(t, uint64(6), w.writeCount())
	sent := sentTimes(c)
	buf := make([]byte, 64)
	for {
		if _, err := c.Read(buf); err != nil {
			require.ErrorIs(t, err, io.EOF)
			break
		}
	}
	contact, granted := w.LastContact()
	assert.Equal(t, 4*time.Second, granted)
	assert.Equal(t, w.epoch.Add(time.Duration(sent[4])), contact, "five of six requests answered")
	assert.Equal(t, sent[5:], sentTimes(c))
}

// scriptedConn replays in, chunk bytes per Read, and swallows writes.
type scriptedConn struct {
	net.Conn
	in    []byte
	chunk int
	reads int
}

func (s *scriptedConn) Read(p []byte) (int, error) {
	s.reads++
	if len(s.in) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), s.chunk)], s.in)
	s.in = s.in[n:]
	return n, nil
}

func (s *scriptedConn) Write(p []byte) (int, error) { return len(p), nil }

func (s *scriptedConn) Close() error { return nil }

// FuzzWireParse: any byte stream, cut into reads anywhere, parses without
// panicking and to the same state as when read whole or byte by byte.
// cuts holds the sizes of the reads (the rest goes in the last one).
func FuzzWireParse(f *testing.F) {
	stream, _ := typicalExchange()
	f.Add(stream, []byte{3, 1, 200})
	f.Add(connectResponse(0, 0), []byte{5})
	f.Add(join(connectResponse(30000, 7), notification("/x"), reply(1)), []byte{2, 2, 2, 2})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff}, []byte{1})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3}, []byte{})
	f.Add([]byte{}, []byte{})
	sent := make([]int64, 64)
	for i := range sent {
		sent[i] = int64(i+1) * 10
	}
	f.Fuzz(func(t *testing.T, stream, cuts []byte) {
		whole := testConn(sent...)
		wantErr := whole.parse(stream)
		want := stateOf(whole)

		c := testConn(sent...)
		err := parseCut(c, stream, cutOffsets(cuts, len(stream))...)
		require.Equal(t, wantErr, err, "reads of sizes %v", cuts)
		require.Equal(t, want, stateOf(c), "reads of sizes %v", cuts)

		c = testConn(sent...)
		require.Equal(t, wantErr, parseBytes(c, stream), "one byte per read")
		require.Equal(t, want, stateOf(c), "one byte per read")

		// contact is the newest answered send, except a refused connect
		// response (the first frame, granting no timeout): no news of a live
		// session.
		popped := len(sent) - len(want.sent)
		refusedOnly := popped == 1 && want.granted <= 0
		if popped > 0 && !refusedOnly {
			require.Equal(t, sent[popped-1], want.contact, "contact is the newest answered send")
		} else {
			require.Zero(t, want.contact)
		}
	})
}

// cutOffsets turns read sizes into increasing offsets within n.
func cutOffsets(sizes []byte, n int) []int {
	var out []int
	at := 0
	for _, s := range sizes {
		at = min(at+int(s), n)
		out = append(out, at)
	}
	return out
}

// Read serves go-zookeeper's small reads from one socket read and hands over
// every byte in order, whatever sizes the socket and the reader use, then the
// socket's error.
func FuzzWireBufferedRead(f *testing.F) {
	stream, _ := typicalExchange()
	f.Add(stream, 7, []byte{4, 30, 200})
	f.Add(stream, 1, []byte{1})
	f.Add(bytes.Repeat(stream, 400), 1<<20, []byte{4, 255, 0})
	f.Fuzz(func(t *testing.T, in []byte, chunk int, sizes []byte) {
		if chunk <= 0 || len(sizes) == 0 {
			return
		}
		c := &wireConn{Conn: &scriptedConn{in: in, chunk: chunk}, w: New(Config{})}
		c.frames = 1 // past the connect response: any payload is a reply
		var got []byte
		for i := 0; ; i++ {
			size := int(sizes[i%len(sizes)])
			if size == 0 {
				size = readBufSize + 1 // a read that bypasses the buffer
			}
			buf := make([]byte, size)
			n, err := c.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				require.ErrorIs(t, err, io.EOF)
				break
			}
			require.Less(t, i, len(in)+2, "no progress")
		}
		require.Equal(t, in, got)
	})
}

func TestPureWireOneSocketReadPerReply(t *testing.T) {
	stream, _ := typicalExchange()
	sc := &scriptedConn{in: stream, chunk: len(stream)}
	c := &wireConn{Conn: sc, w: New(Config{})}
	var hdr [4]byte
	for len(sc.in) > 0 || c.rpos < c.rend {
		_, err := io.ReadFull(c, hdr[:])
		require.NoError(t, err)
		_, err = io.ReadFull(c, make([]byte, binary.BigEndian.Uint32(hdr[:])))
		require.NoError(t, err)
	}
	assert.Equal(t, 1, sc.reads)
}

// A burst larger than the small buffer is read through a shared one, which
// goes back once drained: a read that waits holds the small buffer only.
func TestPureWireIdleReadHoldsSmallBuffer(t *testing.T) {
	stream, _ := typicalExchange()
	burst := bytes.Repeat(stream, 40) // about 16 KiB: several wide reads
	sc := &scriptedConn{in: burst, chunk: len(burst)}
	c := &wireConn{Conn: sc, w: New(Config{})}
	c.frames = 1
	got, err := io.ReadAll(io.LimitReader(c, int64(len(burst))))
	require.NoError(t, err)
	require.Equal(t, burst, got)
	assert.LessOrEqual(t, sc.reads, 3, "one small read, then wide ones")

	sc.in = stream // quiet again: one short reply
	got = make([]byte, len(stream))
	_, err = io.ReadFull(c, got)
	require.NoError(t, err)
	require.Equal(t, stream, got)
	_, err = c.Read(make([]byte, 4)) // drained: the next read waits (here, EOF)
	require.ErrorIs(t, err, io.EOF)
	assert.Nil(t, c.wide, "the shared buffer went back")
	assert.False(t, c.wantWide, "a short reply: the next read waits on the small buffer")
}

// expect waits for the packet that carries its marker, not for any packet
// of the client: a read written meanwhile does not count.
func TestPureWireExpectWaitsForItsOwnPacket(t *testing.T) {
	w := New(Config{})
	c := &wireConn{Conn: &scriptedConn{}, w: w}
	seen := w.Expect("guid-1")
	_, err := c.Write([]byte("getData /a/_c_guid-0-lock-0000000001"))
	require.NoError(t, err)
	select {
	case <-seen.seen:
		t.Fatal("another packet fulfilled the expectation")
	default:
	}
	_, err = c.Write([]byte("create /a/_c_guid-1-lock-"))
	require.NoError(t, err)
	select {
	case <-seen.seen:
	default:
		t.Fatal("the create's packet did not fulfil it")
	}
	other := w.Expect("guid-2")
	w.Forget("guid-2")
	_, err = c.Write([]byte("create /a/_c_guid-2-lock-"))
	require.NoError(t, err)
	select {
	case <-other.seen:
		t.Fatal("a forgotten expectation was fulfilled")
	default:
	}
	assert.Empty(t, w.expected)
}
