package main

import (
	"context"
	"flag"

	"github.com/zklock/zklock"
)

// This file holds exec's --permits: k of a semaphore's N permits at once.

// addPermitsFlag adds --permits to exec's flags.
func addPermitsFlag(fs *flag.FlagSet) {
	fs.Int("permits", 1, "with --semaphore N: take `k` of the N permits at once, all or none (1..N)")
}

// checkPermits validates --permits against --semaphore; it returns a usage
// message or "".
func (o *execOpts) checkPermits() string {
	switch {
	case o.take < 1:
		return "--permits must be at least 1"
	case o.take > 1 && o.permits == 0:
		return "--permits takes permits of a semaphore: use it with --semaphore N"
	case o.permits > 0 && o.take > o.permits:
		return "--permits must not exceed --semaphore (a request for more than N permits would wait for ever)"
	}
	return ""
}

// semaphore is the lock --semaphore N asks for: one permit, or --permits k
// of them as one lease.
func (o *execOpts) semaphore(c *zklock.Client) (zklock.Locker, error) {
	s, err := c.NewSemaphore(o.paths[0], o.permits)
	if err != nil {
		return nil, err
	}
	if o.take > 1 {
		return permits{s, o.take}, nil
	}
	return s, nil
}

// permits is k permits of a semaphore as the lock exec holds.
type permits struct {
	s *zklock.Semaphore
	k int
}

func (p permits) Acquire(ctx context.Context) (*zklock.Lease, error) { return p.s.AcquireN(ctx, p.k) }

func (p permits) TryAcquire(ctx context.Context) (*zklock.Lease, error) {
	return p.s.TryAcquireN(ctx, p.k)
}
