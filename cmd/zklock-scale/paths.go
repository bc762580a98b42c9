package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/go-zookeeper/zk"
	"github.com/zklock/zklock/internal/benchkit"
)

// primitive is the lock a path is used as, fixed by its index.
type primitive uint8

const (
	primMutex primitive = iota
	primRW
	primSemaphore
)

// primitiveOf gives most paths a mutex, one in ten a read/write lock and
// one in ten a semaphore; the hottest three paths (0, 1, 2) are one of
// each. In a mutex-only run every path is a mutex.
func primitiveOf(i int, mutexOnly bool) primitive {
	switch {
	case mutexOnly:
		return primMutex
	case i%10 == 1:
		return primRW
	case i%10 == 2:
		return primSemaphore
	}
	return primMutex
}

func pathName(base string, i int) string { return fmt.Sprintf("%s/p%05d", base, i) }

// picker draws path indices by a Zipf distribution: P(i) ∝ (v+i)^-s over
// [0, paths), so a few paths are hot and most are seldom used.
type picker struct{ z *rand.Zipf }

func newPicker(r *rand.Rand, paths int, s, v float64) picker {
	return picker{rand.NewZipf(r, s, v, uint64(paths-1))}
}

func (p picker) next() int { return int(p.z.Uint64()) }

// createPaths makes every lock path of a run (and for a semaphore its limit
// and its two queues, as zklock lays them out) before the run is measured,
// so that the measured writes are the locks' own. It batches creates into
// transactions.
func createPaths(ctx context.Context, conn *zk.Conn, base string, paths int, mutexOnly bool, permits int) error {
	if err := benchkit.EnsurePath(conn, base); err != nil {
		return err
	}
	acl := zk.WorldACL(zk.PermAll)
	var ops []any
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		_, err := conn.Multi(ops...)
		ops = ops[:0]
		return err
	}
	for i := range paths {
		p := pathName(base, i)
		if primitiveOf(i, mutexOnly) != primSemaphore {
			ops = append(ops, &zk.CreateRequest{Path: p, Acl: acl})
		} else {
			ops = append(ops, &zk.CreateRequest{Path: p, Data: []byte(strconv.Itoa(permits)), Acl: acl},
				&zk.CreateRequest{Path: p + "/locks", Acl: acl}, &zk.CreateRequest{Path: p + "/leases", Acl: acl})
		}
		if len(ops) >= 300 {
			if err := flush(); err != nil {
				return fmt.Errorf("zklock-scale: creating the lock paths under %s: %w", base, err)
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if err := flush(); err != nil {
		return fmt.Errorf("zklock-scale: creating the lock paths under %s: %w", base, err)
	}
	return nil
}
