// Package lockservice is the HTTP/JSON service of 'zklock serve': locks,
// read/write locks, semaphores and elections of one zklock Client, for
// programs in any language.
//
// A caller's holding is its request: the answer to an acquire is a stream
// that stays open while the lock is held, and the lock is released when the
// caller closes it (or its connection ends: a killed caller). A lock lost
// while held ends the stream with the reason, written before the service
// grants the path to any of its other callers. See docs/serve.md.
package lockservice

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/zklock/zklock"
)

// DefaultMaxHolds is how many holdings and waits one caller may have at once
// when Config.MaxHolds is 0.
const DefaultMaxHolds = 64

// Config configures a Service.
type Config struct {
	// Prefix: paths outside it are refused (403). "" or "/" allows every
	// path zklock accepts.
	Prefix string
	// Tokens maps bearer tokens to caller names. When it is empty, no
	// token is asked for: serve only on loopback or a Unix socket then.
	Tokens map[string]string
	// MaxHolds limits the holdings and waits of one caller (a token's name;
	// "local" without tokens): DefaultMaxHolds when 0.
	MaxHolds int
	// Logger receives the service's own events; silent when nil.
	Logger *slog.Logger
}

// Service answers the HTTP API over one Client. It is safe for concurrent use.
type Service struct {
	c      *zklock.Client
	cfg    Config
	log    *slog.Logger
	seq    atomic.Int64
	ctx    context.Context // ended by Close: every stream releases and ends
	cancel context.CancelFunc

	mu       sync.Mutex
	byID     map[string]*holding
	byPath   map[string]map[*holding]struct{}
	perCall  map[string]int // holdings and waits per caller
	closed   bool
	handlers sync.WaitGroup // Add under mu, while not closed
}

// New returns a Service over c. It does no I/O. Close it before closing c.
func New(c *zklock.Client, cfg Config) (*Service, error) {
	if cfg.Prefix == "" {
		cfg.Prefix = "/"
	}
	if cfg.Prefix != "/" {
		if err := zklock.ValidatePath(cfg.Prefix); err != nil {
			return nil, err
		}
	}
	if cfg.MaxHolds == 0 {
		cfg.MaxHolds = DefaultMaxHolds
	}
	if cfg.MaxHolds < 0 {
		return nil, errors.New("lockservice: MaxHolds must not be negative")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Service{
		c: c, cfg: cfg, log: cfg.Logger, ctx: ctx, cancel: cancel,
		byID: map[string]*holding{}, byPath: map[string]map[*holding]struct{}{}, perCall: map[string]int{},
	}, nil
}

// Close ends every stream (releasing its lock, or abandoning its wait) and
// waits for them, about one ZooKeeper round trip each; ctx bounds the wait.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	done := make(chan struct{})
	go func() { s.handlers.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Route is one operation of the API.
type Route struct {
	Method, Path string
	handle       func(s *Service, w http.ResponseWriter, r *http.Request, caller string)
}

// Routes lists every route the service answers.
func Routes() []Route {
	return []Route{
		{"POST", "/v1/lock/acquire", (*Service).acquire},
		{"POST", "/v1/lock/release", (*Service).release},
		{"GET", "/v1/lock/status", (*Service).status},
		{"POST", "/v1/election/campaign", (*Service).campaign},
		{"GET", "/v1/election/leader", (*Service).leader},
		{"GET", "/v1/election/watch", (*Service).watch},
		{"GET", "/healthz", (*Service).health},
	}
}

// Handler returns the service's HTTP handler.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range Routes() {
		mux.HandleFunc(rt.Method+" "+rt.Path, s.wrap(rt))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such route: "+r.Method+" "+r.URL.Path+"; see docs/openapi.json")
	})
	return mux
}

// wrap authenticates the caller and refuses a POST that is not JSON (which
// a web page could send to a local service without asking).
func (s *Service) wrap(rt Route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		caller, ok := s.authenticate(r)
		if !ok && rt.Path != "/healthz" { // a probe sends no token
			w.Header().Set("WWW-Authenticate", `Bearer realm="zklock"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "missing or unknown bearer token; send Authorization: Bearer <token>")
			return
		}
		if r.Method == http.MethodPost && !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			writeError(w, http.StatusUnsupportedMediaType, "bad_request", "the body must be JSON: send Content-Type: application/json")
			return
		}
		s.mu.Lock()
		closed := s.closed
		if !closed {
			s.handlers.Add(1)
		}
		s.mu.Unlock()
		if closed {
			writeError(w, http.StatusServiceUnavailable, "closing", "the service is stopping")
			return
		}
		defer s.handlers.Done()
		rt.handle(s, w, r, caller)
	}
}

// authenticate returns the caller's name: its token's, or "local" when the
// service asks for none.
func (s *Service) authenticate(r *http.Request) (string, bool) {
	if len(s.cfg.Tokens) == 0 {
		return "local", true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return "", false
	}
	for tok, name := range s.cfg.Tokens {
		if subtle.ConstantTimeCompare([]byte(tok), []byte(got)) == 1 {
			return name, true
		}
	}
	return "", false
}

// checkPath refuses a path zklock rejects (400) or outside the prefix (403);
// it returns false after answering.
func (s *Service) checkPath(w http.ResponseWriter, p string) bool {
	if err := zklock.ValidatePath(p); err != nil {
		writeError(w, http.StatusBadRequest, "bad_path", err.Error())
		return false
	}
	pre := strings.TrimSuffix(s.cfg.Prefix, "/")
	if pre != "" && p != pre && !strings.HasPrefix(p, pre+"/") {
		writeError(w, http.StatusForbidden, "forbidden_path", "path "+p+" is outside this service's prefix "+s.cfg.Prefix)
		return false
	}
	return true
}
