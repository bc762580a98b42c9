package zklock

import (
	"hash/maphash"
	"math/bits"
	"sync/atomic"
)

// The guess that a Mutex acquisition will hold at once, which lets it
// watch through its first listing (listwatch.go).
//
// A node that waited, or a listing that showed it behind others, never uses
// the child watch: it fires at the next change of the path and is dropped,
// one watch event for nothing. So only a path whose last two acquisitions
// by this client held at once is expected to (atOnce), or a path this client
// has not taken yet when most of its recent acquisitions, on any path,
// held at once (three in four or more, of four at least): on a fleet's
// scattered paths a client rarely takes a path twice, and the own-node read
// would be paid on almost every acquisition.

// atOnce remembers, per lock path, how the client's last acquisitions of it
// went (not seen, waited, held at once once, or twice or more in a row), and
// expects the next to hold at once after two: one acquisition alone at once
// is as often a gap in a busy queue, where the listing's watch would be
// wasted. A path not seen yet, or seen once at once, follows the client's
// recent acquisitions on all paths (recent). Paths are hashed into a fixed table (2 bits a slot,
// 4 KiB a client, however many paths): paths that share a slot share a
// guess, which costs at most a read or a watch event, never correctness.
type atOnce struct {
	seed   maphash.Seed
	words  [512]atomic.Uint64
	recent atomic.Uint64 // the client's last acquisitions, newest in bit 0: 1 held at once
	seen   atomic.Int64  // how many acquisitions recent holds, up to 64
}

// The slot values.
const (
	atOnceUnseen  = iota // no acquisition of the path yet
	atOnceWaited         // the last one waited
	atOnceOnce           // the last one held at once, the one before did not
	atOnceTrusted        // the last two or more held at once: the next is expected to
)

// A path not seen yet is expected to hold at once when three in four or
// more of the client's last acquisitions did: its last priorWindow, or all
// of them once it has made priorMin. A wrong guess costs a watch event, a
// right one saves a read, so any estimate past even pays; three in four of
// as few as four (a posterior mean of 2/3 from a flat prior) is well past
// it. Waiting for a full window kept a fleet client taking a lock a minute
// from the guess for its first quarter hour. Measured with zklock-scale's
// quick profile, 100 sessions on 10 000 Zipf paths for 40 s: 1.73 reads per
// acquisition with a full window of 16 (2.10 without the prior; zk.Lock
// 1.17), watch events 1.18 (1.15).
const (
	priorWindow = 16
	priorMin    = 4
)

func newAtOnce() *atOnce { return &atOnce{seed: maphash.MakeSeed()} }

func (a *atOnce) slotOf(path string) (*atomic.Uint64, uint) {
	h := maphash.String(a.seed, path)
	return &a.words[h%uint64(len(a.words))], uint(h>>59) * 2 // 32 slots of 2 bits per word
}

// predicts reports that the next acquisition of path is expected to hold at
// once.
func (a *atOnce) predicts(path string) bool {
	w, shift := a.slotOf(path)
	switch (w.Load() >> shift) & 3 {
	case atOnceTrusted:
		return true
	case atOnceUnseen, atOnceOnce: // no history of the path, or too little
		return a.mostlyAtOnce()
	}
	return false
}

// mostlyAtOnce reports that at least three in four of the client's last
// acquisitions (up to priorWindow, and at least priorMin) held at once.
func (a *atOnce) mostlyAtOnce() bool {
	n := min(a.seen.Load(), priorWindow)
	if n < priorMin {
		return false
	}
	held := int64(bits.OnesCount64(a.recent.Load() & (1<<n - 1)))
	return 4*held >= 3*n
}

// learn records how an acquisition of path went.
func (a *atOnce) learn(path string, held bool) {
	a.remember(held)
	w, shift := a.slotOf(path)
	for {
		old := w.Load()
		n := uint64(atOnceWaited)
		if held {
			n = atOnceOnce
			if (old>>shift)&3 >= atOnceOnce {
				n = atOnceTrusted
			}
		}
		if w.CompareAndSwap(old, old&^(3<<shift)|n<<shift) {
			return
		}
	}
}

// remember shifts one outcome into the client's recent acquisitions.
func (a *atOnce) remember(held bool) {
	bit := uint64(0)
	if held {
		bit = 1
	}
	for {
		old := a.recent.Load()
		if a.recent.CompareAndSwap(old, old<<1|bit) {
			break
		}
	}
	if a.seen.Load() < 64 {
		a.seen.Add(1)
	}
}
