package wire

// ZooKeeper's jute encoding, as far as the chroot's rewriting needs it: the
// opcodes whose requests or replies carry paths, a reader and a writer of
// its big-endian ints and strings, and the skipping of the parts of a packet
// that carry no path.

import "encoding/binary"

// ZooKeeper opcodes whose requests or replies carry paths.
const (
	zkOpCreate          = 1
	zkOpDelete          = 2
	zkOpExists          = 3
	zkOpGetData         = 4
	zkOpSetData         = 5
	zkOpGetACL          = 6
	zkOpSetACL          = 7
	zkOpGetChildren     = 8
	zkOpSync            = 9
	zkOpGetChildren2    = 12
	zkOpCheck           = 13
	zkOpMulti           = 14
	zkOpCreate2         = 15
	zkOpCheckWatches    = 17
	zkOpRemoveWatches   = 18
	zkOpCreateContainer = 19
	zkOpDeleteContainer = 20
	zkOpCreateTTL       = 21
	zkOpMultiRead       = 22
	zkOpSetWatches      = 101
	zkOpGetEphemerals   = 103
	zkOpGetAllChildren  = 104
	zkOpSetWatches2     = 105
	zkOpAddWatch        = 106
	zkOpError           = -1
	zkStatLen           = 68 // a Stat as jute writes it: 6 int64 and 5 int32
	zkWatchXid          = -1 // the xid of a watch event
)

// skipACL skips an ACL list: a count, then perms, scheme and id each.
func skipACL(in *jreader) {
	k := in.int32()
	for i := int32(0); i < k && !in.bad; i++ {
		in.skip(4) // perms
		in.buf()   // scheme
		in.buf()   // id
	}
}

// multiHeader copies a multi's op header (type, done, err) and returns the
// type and done.
func multiHeader(in *jreader, out *jwriter) (typ int32, done, ok bool) {
	h := in.next(9)
	if h == nil {
		return 0, false, false
	}
	out.b = append(out.b, h...)
	return int32(binary.BigEndian.Uint32(h[:4])), h[4] != 0, true
}

// jreader reads jute's big-endian encoding; a short buffer sets bad.
type jreader struct {
	b   []byte
	off int
	bad bool
}

func (r *jreader) next(n int) []byte {
	if r.bad || n < 0 || len(r.b)-r.off < n {
		r.bad = true
		return nil
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p
}

func (r *jreader) skip(n int) { r.next(n) }

func (r *jreader) int32() int32 {
	p := r.next(4)
	if p == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(p))
}

// buf skips a length-prefixed buffer or string (-1: null).
func (r *jreader) buf() {
	if n := r.int32(); n > 0 {
		r.skip(int(n))
	}
}

// str reads a string; ok is false for null (or on error).
func (r *jreader) str() (string, bool) {
	n := r.int32()
	if n < 0 || r.bad {
		return "", false
	}
	p := r.next(int(n))
	return string(p), p != nil
}

type jwriter struct{ b []byte }

func (w *jwriter) int32(v int32) { w.b = binary.BigEndian.AppendUint32(w.b, uint32(v)) }

func (w *jwriter) str(s string) {
	w.int32(int32(len(s)))
	w.b = append(w.b, s...)
}
