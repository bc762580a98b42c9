package wire

// The chroot's rewriting of one packet: every path a request carries gets
// the chroot in front, the paths a reply or a watch event carries lose it.

import (
	"encoding/binary"
	"fmt"
)

// request rewrites one request packet, [length][xid][opcode][body]; the
// packet comes back unchanged if it carries no path.
func (r *chroot) request(p []byte) ([]byte, int32, error) {
	if len(p) < 12 {
		return p, 0, nil // a ping or close has a header only
	}
	op := int32(binary.BigEndian.Uint32(p[8:12]))
	in := &jreader{b: p, off: 12}
	out := jwriter{b: make([]byte, 12, len(p)+64)}
	copy(out.b, p[:12])
	var err error
	switch op {
	case zkOpCreate, zkOpDelete, zkOpExists, zkOpGetData, zkOpSetData, zkOpGetACL, zkOpSetACL,
		zkOpGetChildren, zkOpSync, zkOpGetChildren2, zkOpCheck, zkOpCreate2, zkOpCheckWatches,
		zkOpRemoveWatches, zkOpCreateContainer, zkOpDeleteContainer, zkOpCreateTTL,
		zkOpGetEphemerals, zkOpGetAllChildren, zkOpAddWatch:
		err = r.path(in, &out, isCreate(op) && createSeq(*in))
	case zkOpMulti, zkOpMultiRead:
		err = r.multi(in, &out)
	case zkOpSetWatches, zkOpSetWatches2:
		out.b = append(out.b, in.next(8)...) // relative zxid
		lists := 3
		if op == zkOpSetWatches2 {
			lists = 5
		}
		for range lists {
			k := in.int32()
			out.int32(k)
			for i := int32(0); i < k && !in.bad && err == nil; i++ {
				err = r.path(in, &out, false)
			}
		}
	default:
		return p, op, nil
	}
	if err != nil {
		return nil, op, err
	}
	if in.bad {
		return nil, op, fmt.Errorf("%w (opcode %d: malformed)", errChrootRequest, op)
	}
	out.b = append(out.b, in.b[in.off:]...)
	binary.BigEndian.PutUint32(out.b[:4], uint32(len(out.b)-4))
	return out.b, op, nil
}

// multi rewrites the ops of a multi.
func (r *chroot) multi(in *jreader, out *jwriter) error {
	for !in.bad {
		typ, done, ok := multiHeader(in, out)
		if done || !ok {
			return nil
		}
		if err := r.multiOp(in, out, typ); err != nil {
			return err
		}
	}
	return nil
}

// path copies one path from in to out with the chroot in front (a short
// packet is left to the caller, which sees in.bad).
func (r *chroot) path(in *jreader, out *jwriter, seq bool) error {
	s, ok := in.str()
	switch {
	case in.bad:
		return nil
	case !ok:
		return fmt.Errorf("%w: a null path", errChrootRequest)
	}
	q, err := r.prepend(s, seq)
	if err != nil {
		return err
	}
	out.str(q)
	return nil
}

func isCreate(op int32) bool {
	switch op {
	case zkOpCreate, zkOpCreate2, zkOpCreateContainer, zkOpCreateTTL:
		return true
	}
	return false
}

// createSeq reads ahead, on a copy of the reader, whether the create whose
// path starts at in (path, data, ACL, flags) is a sequential one.
func createSeq(in jreader) bool {
	in.buf() // path
	in.buf() // data
	skipACL(&in)
	return SequentialFlags(in.int32())
}

// multiOp rewrites one operation of a multi; an unknown one is refused.
func (r *chroot) multiOp(in *jreader, out *jwriter, typ int32) error {
	switch typ {
	case zkOpCreate, zkOpCreate2, zkOpCreateContainer, zkOpCreateTTL, zkOpDelete, zkOpCheck,
		zkOpSetData, zkOpGetData, zkOpGetChildren:
	default:
		return fmt.Errorf("%w (multi op %d)", errChrootRequest, typ)
	}
	if err := r.path(in, out, isCreate(typ) && createSeq(*in)); err != nil {
		return err
	}
	start := in.off
	switch typ {
	case zkOpCreate, zkOpCreate2, zkOpCreateContainer, zkOpCreateTTL:
		in.buf() // data
		skipACL(in)
		in.skip(4) // flags
		if typ == zkOpCreateTTL {
			in.skip(8)
		}
	case zkOpDelete, zkOpCheck:
		in.skip(4) // version
	case zkOpSetData:
		in.buf()
		in.skip(4)
	case zkOpGetData, zkOpGetChildren:
		in.skip(1) // watch
	}
	if !in.bad {
		out.b = append(out.b, in.b[start:in.off]...)
	}
	return nil
}

// reply rewrites a whole reply frame [length][xid][zxid][err][body] of a
// request with paths, or a watch event; a frame it cannot parse comes back
// unchanged (go-zookeeper then reports it).
func (r *chroot) reply(b []byte, xid, op int32) []byte {
	if len(b) < 20 {
		return b
	}
	in := &jreader{b: b, off: 20}
	out := jwriter{b: make([]byte, 20, len(b))}
	copy(out.b, b[:20])
	if xid == zkWatchXid {
		// A watch event: type, state, path (after a header of xid, zxid, err).
		out.b = append(out.b, in.next(8)...)
		r.stripPath(in, &out)
	} else {
		switch op {
		case zkOpCreate, zkOpCreate2, zkOpCreateContainer, zkOpCreateTTL, zkOpSync:
			if len(b) == 20 {
				return b // an error reply has no body
			}
			r.stripPath(in, &out)
		case zkOpGetEphemerals:
			if len(b) == 20 {
				return b
			}
			k := in.int32()
			out.int32(k)
			for i := int32(0); i < k && !in.bad; i++ {
				r.stripPath(in, &out)
			}
		case zkOpMulti:
			if !r.multiReply(in, &out) {
				return b
			}
		}
	}
	if in.bad {
		return b
	}
	out.b = append(out.b, in.b[in.off:]...)
	binary.BigEndian.PutUint32(out.b[:4], uint32(len(out.b)-4))
	return out.b
}

// multiReply rewrites the results of a multi; false: a result it cannot
// parse, and the frame goes unchanged.
func (r *chroot) multiReply(in *jreader, out *jwriter) bool {
	for !in.bad {
		typ, done, ok := multiHeader(in, out)
		if done || !ok {
			break
		}
		start := in.off
		switch typ {
		case zkOpCreate:
			r.stripPath(in, out)
		case zkOpCreate2, zkOpCreateContainer, zkOpCreateTTL:
			r.stripPath(in, out)
			start = in.off
			in.skip(zkStatLen)
		case zkOpSetData:
			in.skip(zkStatLen)
		case zkOpDelete, zkOpCheck:
		case zkOpError:
			in.skip(4)
		default:
			return false
		}
		if typ != zkOpCreate {
			out.b = append(out.b, in.b[start:in.off]...)
		}
	}
	return true
}

func (r *chroot) stripPath(in *jreader, out *jwriter) {
	s, ok := in.str()
	if !ok {
		out.int32(-1)
		return
	}
	out.str(r.strip(s))
}
