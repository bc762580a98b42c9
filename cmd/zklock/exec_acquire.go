package main

// How exec gets its lock: connecting, building the primitive the flags ask
// for, waiting for the turn (or trying, with --try), and reporting why it
// could not.

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/leaderprobe"
)

var errTimedOut = errors.New("--timeout expired")

// acquired is the outcome of connecting and acquiring the lock.
type acquired struct {
	client  *zklock.Client
	lease   *zklock.Lease
	err     error
	granted time.Time // no later than the grant, give or take Acquire's return (see execOpts.granted)
}

// acquire connects and waits for the lock. It returns the client and lease,
// or a nil client and the exit code after reporting the failure.
func (o *execOpts) acquire(sigs <-chan os.Signal, stderr io.Writer) (*zklock.Client, *zklock.Lease, int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if o.timeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, o.timeout, errTimedOut)
		defer stop()
	}
	done := make(chan acquired, 1)
	go func() { done <- o.connectAndAcquire(ctx, stderr) }()

	var r acquired
	select {
	case r = <-done:
	case sig := <-sigs:
		cancel() // Acquire removes our queue node before it returns
		r = <-done
		if r.client != nil {
			closeClient(r.client) // releases the lease if we got it meanwhile
		}
		return nil, nil, fail(stderr, 128+signum(sig), "stopped by %s while waiting for %s", forwarded[sig], o.path)
	}
	if r.err == nil {
		o.granted = r.granted
		o.grantedSession = r.client.SessionTimeout()
		o.sessionTimeout = r.client.SessionTimeout
		return r.client, r.lease, 0
	}
	return nil, nil, o.acquireFailed(r, errors.Is(context.Cause(ctx), errTimedOut), stderr)
}

// connectAndAcquire opens a session and acquires the lock (or tries to, with
// --try), bounded by ctx. The client is returned even when acquiring fails.
func (o *execOpts) connectAndAcquire(ctx context.Context, stderr io.Writer) acquired {
	opts := []zklock.Option{zklock.WithSessionTimeout(o.session)}
	grants := &grantClock{held: map[*grantSpan]bool{}}
	o.grants = grants
	if o.maxHold > 0 {
		opts = append(opts, zklock.WithMaxHold(o.maxHold), zklock.WithTracer(grants))
	}
	if o.verbose {
		opts = append(opts, zklock.WithLogger(slog.New(slog.NewTextHandler(stderr, nil))))
	}
	conn := *o.conn
	if o.try {
		// --try never waits for a lock, and not long for ZooKeeper either.
		conn.connectTimeout = min(conn.connectTimeout, tryConnectTimeout)
	}
	client, err := conn.connectOrRefused(ctx, opts...)
	if err != nil {
		return acquired{err: err}
	}
	lock, err := o.primitive(client)
	var lease *zklock.Lease
	granted := time.Now() // a try (a job's start too) is granted after this
	if err == nil {
		actx := zklock.ContextWithOwner(ctx, o.owner)
		if o.try || o.oncePer > 0 {
			lease, err = lock.TryAcquire(actx)
		} else {
			lease, err = lock.Acquire(actx)
			granted = time.Now() // waited its turn: as soon after the grant as zklock can tell
		}
	}
	if first, ok := grants.earliest(); ok && first.Before(granted) {
		granted = first // --and: a path granted while exec waited for the next
	}
	return acquired{client, lease, err, granted}
}

// grantClock is a Tracer that times the grant of each part of a lease: the
// library's hold limit (WithMaxHold) runs from each part's own grant, so
// with --and the first path taken frees itself first, and exec's limit must
// run from that grant, not from the end of the whole acquisition. Parts
// that ended (a multi-lock taking them all again) no longer count.
//
// It is also how exec learns, before the library deletes the node, that a
// part reached the hold limit: Ended runs as the lease ends, before its
// node's delete is sent, and kills the command's group there (onLimit), so
// that the group is dead before the next holder can be granted, however
// late exec's own SIGKILL a tenth before the limit (a timer, as the
// library's limit is) comes on a loaded machine.
type grantClock struct {
	mu    sync.Mutex
	held  map[*grantSpan]bool
	limit func() // kills the command's group; nil while no command runs
}

// onLimit sets what a part's reaching the hold limit does (nil: nothing).
func (c *grantClock) onLimit(fn func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.limit = fn
}

type grantSpan struct {
	c  *grantClock
	at time.Time
}

func (c *grantClock) StartAcquire(context.Context, string, string) zklock.AcquireSpan {
	return &grantSpan{c: c}
}

// earliest is the grant of the earliest part still held.
func (c *grantClock) earliest() (first time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for s := range c.held {
		if !ok || s.at.Before(first) {
			first, ok = s.at, true
		}
	}
	return first, ok
}

func (s *grantSpan) Context() string   { return "" } // records no trace in the node
func (s *grantSpan) Queued(int)        {}
func (s *grantSpan) WaitingFor(string) {}
func (s *grantSpan) Failed(error)      {}

// Ended forgets the part; at the hold limit it first kills the command's
// group (see grantClock).
func (s *grantSpan) Ended(err error) {
	s.c.mu.Lock()
	delete(s.c.held, s)
	limit := s.c.limit
	s.c.mu.Unlock()
	if limit != nil && errors.Is(err, zklock.ErrHoldLimit) {
		limit()
	}
}
func (s *grantSpan) Granted(string, int64) zklock.HoldSpan {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.at = time.Now()
	s.c.held[s] = true
	return s
}

// tryConnectTimeout caps --connect-timeout for --try: a caller that will not
// wait for the lock should hear of an outage quickly.
const tryConnectTimeout = 3 * time.Second

// primitive is the lock the flags ask for.
func (o *execOpts) primitive(c *zklock.Client) (zklock.Locker, error) {
	switch {
	case o.oncePer > 0:
		var opts []zklock.JobOption
		if o.retry {
			opts = append(opts, zklock.RetryFailed())
		}
		var j *zklock.Job
		var err error
		if o.cal != nil {
			j, err = c.NewCalendarJob(o.paths[0], *o.cal, opts...)
		} else {
			j, err = c.NewJob(o.paths[0], o.oncePer, opts...)
		}
		if err != nil {
			return nil, err
		}
		return jobLock{j, &o.jobRun}, nil
	case o.read || o.write:
		var opts []zklock.RWOption
		if o.kazoo {
			opts = append(opts, zklock.KazooNames())
		}
		rw, err := c.NewRWMutex(o.paths[0], opts...)
		if err != nil {
			return nil, err
		}
		if o.read {
			return rw.Reader(), nil
		}
		return rw.Writer(), nil
	case o.permits > 0:
		return o.semaphore(c)
	case o.value != "":
		e, err := c.NewElection(o.paths[0])
		if err != nil {
			return nil, err
		}
		return campaign{e, o.value, o.startProbe(e)}, nil
	case len(o.paths) > 1:
		return asLocker(c.NewMultiLock(o.paths...))
	}
	return asLocker(c.NewMutex(o.paths[0]))
}

// asLocker returns a constructor's lock as a Locker, and no Locker (not one
// holding a nil pointer) with its error.
func asLocker[L zklock.Locker](l L, err error) (zklock.Locker, error) {
	if err != nil {
		return nil, err
	}
	return l, nil
}

// campaign is an election as the lock exec holds: its Acquire campaigns
// with the value. --value excludes --try (see check), so TryAcquire is
// never called; it refuses rather than block.
type campaign struct {
	e     *zklock.Election
	value string
	probe *leaderprobe.Probe // --http, or nil
}

func (c campaign) Acquire(ctx context.Context) (*zklock.Lease, error) {
	ld, err := c.e.Campaign(ctx, c.value)
	if err != nil {
		return nil, err
	}
	if c.probe != nil {
		c.probe.Lead(ld)
	}
	return ld.Lease(), nil
}

func (c campaign) TryAcquire(context.Context) (*zklock.Lease, error) {
	return nil, errors.New("an election campaign cannot be tried: --value excludes --try")
}

// acquireFailed reports why r failed and returns the exit code, telling the
// causes apart by the errors they wrap; timedOut: --timeout expired. It
// closes r's client, if any, after the report.
func (o *execOpts) acquireFailed(r acquired, timedOut bool, stderr io.Writer) int {
	if r.client == nil { // no session: an outage, never contention, whatever --timeout says
		return fail(stderr, o.conn.connectExit(r.err), "%s", o.conn.unreachable(r.err))
	}
	defer closeClient(r.client)
	switch {
	case errors.Is(r.err, zklock.ErrUnreachable):
		return fail(stderr, exitUnavailable, "lost contact with ZooKeeper at %s while waiting for %s: %s", o.conn.servers, o.path, cause(r.err))
	case errors.Is(r.err, zk.ErrNoAuth):
		return fail(stderr, exitSoftware, "ZooKeeper refused to let this client queue on %s: not authorised by the path's ACL (%s); %s", o.path, cause(r.err), authAdvice(r.client, o.paths[0]))
	case errors.Is(r.err, zk.ErrInvalidACL):
		return fail(stderr, exitSoftware, "ZooKeeper refused the protected ACL for %s: the session has no identity it knows (a client certificate counts only where the server asks for one, ssl.clientAuth want or need); give credentials with $%s or --auth-file, or use --acl open", o.path, envAuth)
	case errors.Is(r.err, zklock.ErrIncompatible):
		return fail(stderr, exitUsage, "refusing to share %s: %s", o.path, strings.TrimPrefix(cause(r.err), strings.TrimPrefix(zklock.ErrIncompatible.Error(), libPrefix)+": "))
	case errors.Is(r.err, zklock.ErrLimitMismatch):
		return fail(stderr, exitSoftware, "cannot acquire %s: %s; see the stored limit with 'zklock limit %s', and once no holder uses it any more, clear it with 'zklock limit --reset %s'", o.path, cause(r.err), o.paths[0], o.paths[0])
	case o.oncePer > 0 && (errors.Is(r.err, zklock.ErrRanThisPeriod) || errors.Is(r.err, zklock.ErrLocked)):
		return o.notThisTime(r.err, stderr)
	case errors.Is(r.err, zklock.ErrLocked):
		return fail(stderr, exitLocked, "lock is held: %s is taken or has waiters; drop --try to wait for it, or see who holds it with 'zklock status %s'", o.path, strings.Join(o.paths, " "))
	case timedOut:
		return fail(stderr, exitTimeout, "timed out after %v waiting for %s; see who holds it with 'zklock status %s'", o.timeout, o.path, strings.Join(o.paths, " "))
	default:
		return fail(stderr, exitSoftware, "cannot acquire %s: %s", o.path, cause(r.err))
	}
}
