package zklock

import (
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/go-zookeeper/zk"
)

// Defaults for the options below.
const (
	DefaultSessionTimeout = 10 * time.Second
	DefaultCleanupDelay   = 5 * time.Second
	// DefaultCleanupTimeout bounds how long a failed or cancelled Acquire
	// waits for its queue node to be deleted before returning, while the
	// client is connected (a healthy server confirms in one round trip;
	// without a connection it does not wait at all). The delete goes on in
	// the background until the node or the session is gone.
	DefaultCleanupTimeout = time.Second
	// DefaultConnectTimeout bounds Connect when ctx has no earlier deadline,
	// as Curator's default connection timeout does.
	DefaultConnectTimeout = 15 * time.Second
)

// Option configures a Client. Invalid values make Connect and NewClient fail
// with ErrInvalidOption.
type Option func(*options) error

type options struct {
	sessionTimeout time.Duration
	acl            []zk.ACL
	auth           []authCred
	logger         *slog.Logger
	onEvent        func(zk.Event)
	cleanupDelay   time.Duration
	cleanupRoot    string
	cleanupTimeout time.Duration
	connectTimeout time.Duration
	watchOwnNode   bool
	requeue        bool
	followerLag    time.Duration
	metrics        Metrics
	tls            *tls.Config
	maxHold        time.Duration
	breakOverdue   bool
	tracer         Tracer
	followEnsemble bool
}

type authCred struct {
	scheme string
	auth   []byte
}

func defaultOptions() options {
	return options{
		sessionTimeout: DefaultSessionTimeout,
		acl:            zk.WorldACL(zk.PermAll),
		logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		cleanupDelay:   DefaultCleanupDelay,
		cleanupTimeout: DefaultCleanupTimeout,
		connectTimeout: DefaultConnectTimeout,
		watchOwnNode:   true,
		requeue:        true,
		followEnsemble: true,
		metrics:        noMetrics{},
	}
}

// WithSessionTimeout sets the session timeout asked of the server (default
// DefaultSessionTimeout). The server may clamp it; zklock uses the one granted.
func WithSessionTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("%w: session timeout %v must be positive", ErrInvalidOption, d)
		}
		o.sessionTimeout = d
		return nil
	}
}

// WithACL sets the ACL of every node zklock creates (default: world, all).
func WithACL(acl []zk.ACL) Option {
	return func(o *options) error {
		if len(acl) == 0 {
			return fmt.Errorf("%w: empty ACL", ErrInvalidOption)
		}
		o.acl = acl
		return nil
	}
}

// WithDigestAuth adds digest credentials ("user:password") to the session;
// combine with WithACL(zk.DigestACL(...)) to keep others off the lock nodes.
func WithDigestAuth(user, password string) Option {
	return func(o *options) error {
		if user == "" {
			return fmt.Errorf("%w: digest auth needs a user", ErrInvalidOption)
		}
		o.auth = append(o.auth, authCred{"digest", []byte(user + ":" + password)})
		return nil
	}
}

// WithLogger sends zklock's and go-zookeeper's log lines to l (default: none).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidOption)
		}
		o.logger = l
		return nil
	}
}

// WithEventHandler passes every event of the connection to fn, in order, on
// a goroutine of its own: a slow fn delays only itself, never zklock's view
// of the session. Events wait in a queue of up to 4096 while fn runs; beyond
// that, new ones are dropped. Close waits up to a second for fn to return.
func WithEventHandler(fn func(zk.Event)) Option {
	return func(o *options) error {
		o.onEvent = fn
		return nil
	}
}

// WithCleanupTimeout bounds how long a failing Acquire waits for its own
// node's deletion before it returns (default DefaultCleanupTimeout).
func WithCleanupTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("%w: cleanup timeout %v must be positive", ErrInvalidOption, d)
		}
		o.cleanupTimeout = d
		return nil
	}
}

// WithConnectTimeout bounds how long Connect waits for a session when its
// ctx has no earlier deadline (default DefaultConnectTimeout). Connect's
// error then names the last cause: a refused connection, a server that is not
// ZooKeeper, or one that accepted the connection and never answered.
func WithConnectTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("%w: connect timeout %v must be positive", ErrInvalidOption, d)
		}
		o.connectTimeout = d
		return nil
	}
}

// WithOwnNodeWatch turns the holder's watch on its own node on or off
// (default on). With it, a lease notices at once when an operator or a tool
// deletes its node, and Token needs no extra round trip of the caller; it
// costs one read and one watch event per acquisition. Without it, deletion by
// someone else goes unnoticed until the session ends, and Token costs a read.
func WithOwnNodeWatch(on bool) Option {
	return func(o *options) error {
		o.watchOwnNode = on
		return nil
	}
}

// WithFollowerLag shortens every lease's loss deadline by d: the deadline
// becomes the last moment the leader is known to have heard from the
// session + 80 % of the session timeout − d. Default 0.
//
// Deprecated: it was the way to cover a follower cut off from its leader,
// which goes on answering its clients for syncLimit × tickTime while the
// leader expires their sessions. zklock now counts only contact the leader
// confirmed (see docs/guarantees.md), which covers that on every ensemble
// without configuration. It remains as an extra margin for holders that need
// more time to stop than 20 % of the session timeout. Connect refuses
// (ErrInvalidOption) a value of 20 % or more of the timeout the server
// granted: the leader's word on a held lease may be up to about 60 % of the
// timeout old between two proofs, and a shorter deadline would presume
// healthy leases lost.
func WithFollowerLag(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("%w: follower lag %v is negative", ErrInvalidOption, d)
		}
		o.followerLag = d
		return nil
	}
}

// WithFollowEnsemble chooses whether a client made by Connect follows the
// ensemble's membership (default on): after a reconfig moves the ensemble
// to other servers, it dials the servers /zookeeper/config lists from its
// next connection on, as Curator's EnsembleTracker does. It follows only
// when that configuration names every server's client address and includes
// every address the client was given (a client pointed at a load balancer,
// or at names the configuration does not use, keeps its list); servers
// without dynamic reconfiguration (before 3.5, or with static client ports)
// publish no such list, and nothing is watched. Client.Servers tells which
// addresses a client dials.
func WithFollowEnsemble(on bool) Option {
	return func(o *options) error {
		o.followEnsemble = on
		return nil
	}
}

// WithRequeueOnExpiry chooses what a waiting Acquire does when its session
// expires and its queue node vanishes with it: re-queue on the new session, at
// the back of the queue (true, the default), or fail with ErrSessionExpired.
func WithRequeueOnExpiry(requeue bool) Option {
	return func(o *options) error {
		o.requeue = requeue
		return nil
	}
}

// WithCleanupDelay sets how long after a lock path becomes empty the client
// deletes it (default DefaultCleanupDelay; 0 disables the cleaner). Close runs
// pending cleanups at once.
func WithCleanupDelay(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("%w: cleanup delay %v is negative", ErrInvalidOption, d)
		}
		o.cleanupDelay = d
		return nil
	}
}

// WithCleanupRoot lets the cleaner also delete the empty ancestors of a lock
// path that lie strictly below root (say "/locks" for "/locks/tenant/job"),
// and creates them as container nodes. Without it only the lock path itself
// is removed. root itself and everything above it are never deleted.
func WithCleanupRoot(root string) Option {
	return func(o *options) error {
		if root != "/" {
			if err := validatePath(root); err != nil {
				return fmt.Errorf("%w: cleanup root: %w", ErrInvalidOption, err)
			}
		}
		o.cleanupRoot = root
		return nil
	}
}

// buildOptions applies opts over the defaults; the first invalid one is the error.
func buildOptions(opts []Option) (options, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

// WithTLS makes Connect speak TLS to every server (ZooKeeper's
// secureClientPort), with cfg's roots, client certificate (mutual TLS) and
// versions. cfg.ServerName, if empty, is each server's host as the connect
// string names it. The handshake is part of the dial and keeps Connect's
// bound; a failure (an untrusted certificate, a name mismatch, a refused
// handshake, a plain port) is named in Connect's error. NewClient ignores it:
// the caller's dialer decides there.
func WithTLS(cfg *tls.Config) Option {
	return func(o *options) error {
		if cfg == nil {
			return fmt.Errorf("%w: WithTLS needs a tls.Config", ErrInvalidOption)
		}
		o.tls = cfg
		return nil
	}
}

// WithMaxHold limits how long any lease of the client may be held: d after
// the grant (a read lease made by RWMutex.Downgrade: after the writer's
// grant) the lease ends by itself, as if released, but with Err (and Do's
// and RunSingleton's fn context cause) matching ErrHoldLimit; its node is
// deleted so the next waiter may go. It bounds a holder that is alive but
// stuck, which keeps its session, and so its lock, for ever. The limit is
// published in the lock node's owner record (Owner.MaxHold) for operators.
//
// The limit is enforced by the holder's own timer: a process paused past it
// (GC, a frozen VM) holds on until it runs again. Fencing tokens make that
// safe: the resource refuses the late holder's writes once a later holder's
// token has reached it.
func WithMaxHold(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("%w: max hold %v must be positive", ErrInvalidOption, d)
		}
		o.maxHold = d
		return nil
	}
}

// WithMetrics.
//
// Methods are called synchronously from the goroutine that made the
// observation, some while a lease's internal lock is held: they must return
// quickly, must not block, and must not call back into zklock.
type Metrics interface {
	// Acquired reports an Acquire or TryAcquire that returned: how long it
	// took, and its error (nil when it was granted).
	Acquired(kind string, wait time.Duration, err error)
	// Queued reports the length of the queue an Acquire joined: the lock
	// nodes on the path when it listed them, its own included.
	Queued(kind string, length int)
	// Ended reports a lease's end: how long it was held, and why it ended:
	// ErrReleased, ErrClosed, or an error matching ErrLockLost (LossCause
	// names its cause).
	Ended(kind string, held time.Duration, why error)
	// CleanerDeleted reports a lock path the cleaner removed.
	CleanerDeleted(path string)
	// Retried reports a request that will be sent again after its
	// connection dropped.
	Retried()
	// MultiLockYielded reports a MultiLock that let go of the paths it held
	// to break a wait-for cycle with another client (see MultiLock).
	MultiLockYielded(paths []string)
}

// WithBreakOverdue lets the client's waiters break a holder that is past
// the hold limit it published (WithMaxHold), by the server's clock: the
// waiter right behind it deletes its node once the server's time is surely
// past the holder's grant plus its limit plus half the session timeout.
// It is for holders whose own timer cannot run (a paused process, a frozen
// VM): a running holder ends its lease by itself first. It is safe only
// where the resource checks fencing tokens: the broken holder may act
// before it notices, and only the token tells its writes apart. A
// Semaphore's holders are never broken: its waiters watch the listing, not
// a node ahead.
func WithBreakOverdue() Option {
	return func(o *options) error {
		o.breakOverdue = true
		return nil
	}
}

// WithTracer has every acquisition and lease of the client traced by t
// (none by default). A semaphore's turnstile, held only for a moment, is
// not traced.
func WithTracer(t Tracer) Option {
	return func(o *options) error {
		o.tracer = t
		return nil
	}
}
