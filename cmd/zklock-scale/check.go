package main

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
)

// violation is one moment at which a path was held in a way its primitive
// forbids: two exclusive holders (mutex or writer), a writer beside
// readers, or more permits than the semaphore has.
type violation struct {
	Path int32
	At   int64 // wall-clock ns of the grant that broke the rule
	What string
}

func (v violation) String() string {
	return fmt.Sprintf("path %d at %d: %s", v.Path, v.At, v.What)
}

// checkExclusion returns every violation among recs, path by path; permits
// is the semaphores' N. A grant at the very nanosecond of another holder's
// release does not overlap it (the release's time is taken before the
// release is sent, the grant's after the grant arrived).
func checkExclusion(recs []record, permits int) []violation {
	byPath := map[int32][]record{}
	for _, r := range recs {
		byPath[r.Path] = append(byPath[r.Path], r)
	}
	var out []violation
	for _, p := range slices.Sorted(maps.Keys(byPath)) {
		out = append(out, checkPath(p, byPath[p], permits)...)
	}
	return out
}

// edge is a holding's start (+1) or end (-1) on a path's timeline.
type edge struct {
	at    int64
	delta int
	kind  kind
}

// checkPath sweeps one path's holdings in time order, ends before starts
// at the same instant, and counts who holds.
func checkPath(path int32, recs []record, permits int) []violation {
	edges := make([]edge, 0, 2*len(recs))
	for _, r := range recs {
		edges = append(edges, edge{r.Grant, +1, r.Kind}, edge{r.Release, -1, r.Kind})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.delta, b.delta))
	})
	var held [numKinds]int
	var out []violation
	for _, e := range edges {
		held[e.kind] += e.delta
		if e.delta < 0 {
			continue
		}
		if what := broken(held, permits); what != "" {
			out = append(out, violation{Path: path, At: e.at, What: what})
		}
	}
	return out
}

// broken names the rule that held breaks, or "".
func broken(held [numKinds]int, permits int) string {
	exclusive := held[kindMutex] + held[kindWrite]
	switch {
	case exclusive > 1:
		return fmt.Sprintf("%d exclusive holders (mutex %d, write %d)", exclusive, held[kindMutex], held[kindWrite])
	case exclusive == 1 && held[kindRead]+held[kindPermit] > 0:
		return fmt.Sprintf("an exclusive holder beside %d readers and %d permits", held[kindRead], held[kindPermit])
	case held[kindPermit] > permits:
		return fmt.Sprintf("%d permits held, limit %d", held[kindPermit], permits)
	case held[kindPermit] > 0 && held[kindRead] > 0:
		return "permits and readers on one path"
	}
	return ""
}
