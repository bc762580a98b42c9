package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// errTestInvalid is the chroot's Config.InvalidPath in these tests.
var errTestInvalid = errors.New("invalid path")

// packet builds [length][fields...] from int32s, strings, bools and raw bytes.
func packet(fields ...any) []byte {
	w := jwriter{b: make([]byte, 4)}
	for _, f := range fields {
		switch v := f.(type) {
		case int32:
			w.int32(v)
		case int64:
			w.b = binary.BigEndian.AppendUint64(w.b, uint64(v))
		case string:
			w.str(v)
		case bool:
			if v {
				w.b = append(w.b, 1)
			} else {
				w.b = append(w.b, 0)
			}
		case []byte:
			w.b = append(w.b, v...)
		default:
			panic(f)
		}
	}
	binary.BigEndian.PutUint32(w.b, uint32(len(w.b)-4))
	return w.b
}

func TestPureChrootRequests(t *testing.T) {
	r := newChroot("/app", errTestInvalid)
	stat := make([]byte, zkStatLen)
	acl := []any{int32(1), int32(31), "world", "anyone"}
	cases := []struct {
		name    string
		in, out []byte
	}{
		{"create", packet(append([]any{int32(7), int32(zkOpCreate), "/a/b", "data"}, append(acl, int32(2))...)...),
			packet(append([]any{int32(7), int32(zkOpCreate), "/app/a/b", "data"}, append(acl, int32(2))...)...)},
		{"root", packet(int32(8), int32(zkOpGetChildren), "/", true), packet(int32(8), int32(zkOpGetChildren), "/app", true)},
		{"delete", packet(int32(9), int32(zkOpDelete), "/x", int32(-1)), packet(int32(9), int32(zkOpDelete), "/app/x", int32(-1))},
		{"ping", packet(int32(-2), int32(11)), packet(int32(-2), int32(11))},
		{"auth", packet(int32(-4), int32(100), int32(0), "digest", "u:p"), packet(int32(-4), int32(100), int32(0), "digest", "u:p")},
		{"setWatches",
			packet(int32(-8), int32(zkOpSetWatches), int64(42), int32(1), "/d", int32(0), int32(2), "/c1", "/"),
			packet(int32(-8), int32(zkOpSetWatches), int64(42), int32(1), "/app/d", int32(0), int32(2), "/app/c1", "/app")},
		{"multi",
			packet(append(append([]any{int32(3), int32(zkOpMulti),
				int32(zkOpCreate), false, int32(-1), "/m", "x"}, append(acl, int32(0))...),
				int32(zkOpSetData), false, int32(-1), "/m", "y", int32(0),
				int32(zkOpCheck), false, int32(-1), "/m", int32(1),
				int32(zkOpDelete), false, int32(-1), "/m", int32(-1),
				int32(-1), true, int32(-1))...),
			packet(append(append([]any{int32(3), int32(zkOpMulti),
				int32(zkOpCreate), false, int32(-1), "/app/m", "x"}, append(acl, int32(0))...),
				int32(zkOpSetData), false, int32(-1), "/app/m", "y", int32(0),
				int32(zkOpCheck), false, int32(-1), "/app/m", int32(1),
				int32(zkOpDelete), false, int32(-1), "/app/m", int32(-1),
				int32(-1), true, int32(-1))...)},
	}
	for _, tc := range cases {
		got, _, err := r.request(tc.in)
		if err != nil || !bytes.Equal(got, tc.out) {
			t.Errorf("%s: got %x, %v\nwant %x", tc.name, got, err, tc.out)
		}
	}
	// A multi op it cannot parse is refused rather than sent outside the chroot.
	bad := packet(int32(3), int32(zkOpMulti), int32(99), false, int32(-1), "/m", int32(-1), true, int32(-1))
	if _, _, err := r.request(bad); err == nil {
		t.Errorf("unknown multi op: no error")
	}
	if _, _, err := r.request(packet(int32(3), int32(zkOpCreate), int32(500), "/x")); err == nil {
		t.Errorf("truncated create: no error")
	}

	// Replies: [xid][zxid][err][body].
	replies := []struct {
		name    string
		xid, op int32
		in, out []byte
	}{
		{"create", 7, zkOpCreate, packet(int32(7), int64(5), int32(0), "/app/a/b"), packet(int32(7), int64(5), int32(0), "/a/b")},
		{"create2", 7, zkOpCreate2, packet(int32(7), int64(5), int32(0), "/app/a", stat), packet(int32(7), int64(5), int32(0), "/a", stat)},
		{"error", 7, zkOpCreate, packet(int32(7), int64(5), int32(-110)), packet(int32(7), int64(5), int32(-110))},
		{"watch", -1, 0, packet(int32(-1), int64(-1), int32(0), int32(2), int32(3), "/app/n"), packet(int32(-1), int64(-1), int32(0), int32(2), int32(3), "/n")},
		{"watch on the chroot", -1, 0, packet(int32(-1), int64(-1), int32(0), int32(4), int32(3), "/app"), packet(int32(-1), int64(-1), int32(0), int32(4), int32(3), "/")},
		{"outside", -1, 0, packet(int32(-1), int64(-1), int32(0), int32(2), int32(3), "/apple"), packet(int32(-1), int64(-1), int32(0), int32(2), int32(3), "/apple")},
		{"multi", 3, zkOpMulti,
			packet(int32(3), int64(9), int32(0),
				int32(zkOpCreate), false, int32(0), "/app/m",
				int32(zkOpCreate2), false, int32(0), "/app/m/s-0000000001", stat,
				int32(zkOpSetData), false, int32(0), stat,
				int32(zkOpCheck), false, int32(0),
				int32(-1), true, int32(-1)),
			packet(int32(3), int64(9), int32(0),
				int32(zkOpCreate), false, int32(0), "/m",
				int32(zkOpCreate2), false, int32(0), "/m/s-0000000001", stat,
				int32(zkOpSetData), false, int32(0), stat,
				int32(zkOpCheck), false, int32(0),
				int32(-1), true, int32(-1))},
		{"failed multi", 3, zkOpMulti,
			packet(int32(3), int64(9), int32(0),
				int32(zkOpError), false, int32(-110), int32(-110),
				int32(zkOpError), false, int32(-2), int32(-2),
				int32(-1), true, int32(-1)),
			packet(int32(3), int64(9), int32(0),
				int32(zkOpError), false, int32(-110), int32(-110),
				int32(zkOpError), false, int32(-2), int32(-2),
				int32(-1), true, int32(-1))},
	}
	for _, tc := range replies {
		if got := r.reply(tc.in, tc.xid, tc.op); !bytes.Equal(got, tc.out) {
			t.Errorf("%s reply: got %x\nwant %x", tc.name, got, tc.out)
		}
	}
}

// pipeConn is a net.Conn over a reader and a writer.
type pipeConn struct {
	net.Conn
	r io.Reader
	w bytes.Buffer
}

func (p *pipeConn) Read(b []byte) (int, error)       { return p.r.Read(b) }
func (p *pipeConn) Write(b []byte) (int, error)      { return p.w.Write(b) }
func (p *pipeConn) SetReadDeadline(time.Time) error  { return nil }
func (p *pipeConn) SetWriteDeadline(time.Time) error { return nil }
func (p *pipeConn) Close() error                     { return nil }

// chrootConn passes the connect exchange, rewrites the replies to the
// requests with paths it saw go out, and streams every other frame.
func TestPureChrootConn(t *testing.T) {
	connectResp := packet(int32(0), int32(4000), int64(1), "0123456789abcdef")
	in := bytes.Join([][]byte{
		connectResp,
		packet(int32(1), int64(2), int32(0), "/app/x"),                         // reply to the create
		packet(int32(2), int64(3), int32(0), bytes.Repeat([]byte("d"), 40000)), // a large get reply, streamed
		packet(int32(-1), int64(-1), int32(0), int32(1), int32(3), "/app/x"),   // a watch event
		packet(int32(-2), int64(3), int32(0)),                                  // a ping reply
	}, nil)
	pc := &pipeConn{r: bytes.NewReader(in)}
	c := newChrootConn(pc, newChroot("/app", errTestInvalid))
	connectReq := packet(int32(0), int64(0), int32(4000), int64(0), "0123456789abcdef")
	if _, err := c.Write(connectReq); err != nil {
		t.Fatal(err)
	}
	create := packet(int32(1), int32(zkOpCreate), "/x", "", int32(0), int32(0))
	if n, err := c.Write(create); err != nil || n != len(create) {
		t.Fatalf("write: %d, %v", n, err)
	}
	if _, err := c.Write(packet(int32(2), int32(zkOpGetData), "/x", false)); err != nil {
		t.Fatal(err)
	}
	wantOut := bytes.Join([][]byte{connectReq,
		packet(int32(1), int32(zkOpCreate), "/app/x", "", int32(0), int32(0)),
		packet(int32(2), int32(zkOpGetData), "/app/x", false)}, nil)
	if !bytes.Equal(pc.w.Bytes(), wantOut) {
		t.Errorf("sent %x\nwant %x", pc.w.Bytes(), wantOut)
	}
	got, err := io.ReadAll(readerFunc(func(b []byte) (int, error) { return c.Read(b[:min(len(b), 1000)]) }))
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Join([][]byte{
		connectResp,
		packet(int32(1), int64(2), int32(0), "/x"),
		packet(int32(2), int64(3), int32(0), bytes.Repeat([]byte("d"), 40000)),
		packet(int32(-1), int64(-1), int32(0), int32(1), int32(3), "/x"),
		packet(int32(-2), int64(3), int32(0)),
	}, nil)
	if !bytes.Equal(got, want) {
		t.Errorf("read %d bytes, want %d: %q", len(got), len(want), got[:min(len(got), 200)])
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(b []byte) (int, error) { return f(b) }

// FuzzChrootReply: no reply, however malformed, makes the rewriter panic, and
// a reply it rewrites is a well-formed frame.
func FuzzChrootReply(f *testing.F) {
	f.Add(packet(int32(3), int64(9), int32(0), int32(zkOpCreate), false, int32(0), "/app/m", int32(-1), true, int32(-1)), int32(zkOpMulti))
	f.Add(packet(int32(7), int64(5), int32(0), "/app/a/b"), int32(zkOpCreate))
	f.Add(packet(int32(-1), int64(-1), int32(0), int32(2), int32(3), "/app/n"), int32(0))
	r := newChroot("/app", errTestInvalid)
	f.Fuzz(func(t *testing.T, b []byte, op int32) {
		if len(b) < 8 {
			return
		}
		xid := int32(binary.BigEndian.Uint32(b[4:8]))
		out := r.reply(b, xid, op)
		if !bytes.Equal(out, b) && int(binary.BigEndian.Uint32(out[:4])) != len(out)-4 {
			t.Fatalf("rewritten frame has a wrong length")
		}
		_, _, _ = r.request(b)
	})
}

// The rewriter refuses, rather than prefixes, a path that is not a valid
// absolute one, in every kind of request that carries paths: "-b" under
// /app would be /app-b, a sibling's tree.
func TestPureChrootRefusesInvalidPaths(t *testing.T) {
	r := newChroot("/app", errTestInvalid)
	acl := []any{int32(1), int32(31), "world", "anyone"}
	create := func(p string, flags int32) []byte {
		return packet(append(append([]any{int32(7), int32(zkOpCreate), p, "d"}, acl...), flags)...)
	}
	multi := func(p string) []byte {
		return packet(int32(3), int32(zkOpMulti), int32(zkOpCheck), false, int32(-1), "/ok", int32(-1),
			int32(zkOpSetData), false, int32(-1), p, "x", int32(-1), int32(-1), true, int32(-1))
	}
	for _, p := range []string{"-b", "", "b", "-b/x", "/a/../../b", "/a/.", "//a", "/a/", "/a\x00", "/\u0085"} {
		for name, pkt := range map[string][]byte{
			"get":        packet(int32(8), int32(zkOpGetData), p, false),
			"delete":     packet(int32(9), int32(zkOpDelete), p, int32(-1)),
			"create":     create(p, 0),
			"multi":      multi(p),
			"setWatches": packet(int32(-8), int32(zkOpSetWatches), int64(1), int32(1), "/d", int32(1), p, int32(0)),
		} {
			if _, _, err := r.request(pkt); !errors.Is(err, errTestInvalid) || !errors.Is(err, errChrootRequest) {
				t.Errorf("%s %q: got %v, want errTestInvalid", name, p, err)
			}
		}
	}
	if _, _, err := r.request(packet(int32(8), int32(zkOpGetData), int32(-1), false)); !errors.Is(err, errChrootRequest) {
		t.Errorf("null path: got %v", err)
	}
	// A sequential create may end in "/": the number follows.
	for _, flags := range []int32{2, 3, 6} {
		got, _, err := r.request(create("/m/", flags))
		if want := create("/app/m/", flags); err != nil || !bytes.Equal(got, want) {
			t.Errorf("sequential create (flags %d): got %x, %v\nwant %x", flags, got, err, want)
		}
	}
	if _, _, err := r.request(create("-b/", 2)); !errors.Is(err, errTestInvalid) {
		t.Errorf("relative sequential create: got %v", err)
	}
}

// FuzzChrootRequestPath: a request the rewriter sends carries only paths
// at or under the chroot that ZooKeeper accepts; one it refuses carried a
// path ZooKeeper's client refuses too.
func FuzzChrootRequestPath(f *testing.F) {
	for _, p := range []string{"-b", "/a", "/", "/a/", "", "/a/..", "/a/..x", "//"} {
		f.Add(p, int32(0), uint8(0))
		f.Add(p, int32(2), uint8(1))
	}
	r := newChroot("/app", errTestInvalid)
	f.Fuzz(func(t *testing.T, p string, flags int32, kind uint8) {
		seq := false
		var pkt []byte
		switch kind % 3 {
		case 0:
			pkt = packet(int32(8), int32(zkOpExists), p, false)
		case 1:
			seq = SequentialFlags(flags)
			pkt = packet(int32(7), int32(zkOpCreate), p, "d", int32(0), flags)
		case 2:
			seq = SequentialFlags(flags)
			pkt = packet(int32(3), int32(zkOpMulti), int32(zkOpCreate), false, int32(-1), p, "d", int32(0), flags,
				int32(-1), true, int32(-1))
		}
		out, _, err := r.request(pkt)
		if err != nil {
			if !errors.Is(err, errTestInvalid) || PathProblem(p, seq) == "" {
				t.Fatalf("%q refused: %v", p, err)
			}
			return
		}
		in := &jreader{b: out, off: 12}
		if kind%3 == 2 {
			in.skip(9) // the op's header
		}
		q, ok := in.str()
		if !ok || (q != "/app" && !strings.HasPrefix(q, "/app/")) {
			t.Fatalf("%q sent as %q: outside the chroot", p, q)
		}
		if seq {
			q += "0000000001"
		}
		if !zkAcceptsPath(q) {
			t.Fatalf("%q sent as %q, which ZooKeeper rejects", p, q)
		}
	})
}
