// Package lockservice is the HTTP/JSON service of 'zklock serve': locks,
// read/write locks, semaphores and elections of one zklock Client, for
// programs in any language.
//
// A caller's holding is its request: the answer to an acquire is a stream,
// sent at once, that stays open while the caller waits and then holds the
// lock, with a heartbeat line every Config.Heartbeat (so that idle timeouts
// of clients and proxies do not end it, and a caller that stopped reading is
// found), and the lock is released when the caller closes it (or its
// connection ends: a killed caller). A lock lost while held ends the stream
// with the reason, written before the service grants the path to any of its
// other callers. Requests a web page could have sent (an Origin, a foreign
// Host) are refused before authentication. See docs/serve.md.
package lockservice

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zklock/zklock"
)

// DefaultMaxHolds is how many holdings and waits one caller may have at once
// when Config.MaxHolds is 0.
const DefaultMaxHolds = 64

// DefaultHeartbeat is how often a stream says it is alive when
// Config.Heartbeat is 0: well inside every common idle timeout (nginx's
// proxy_read_timeout and AWS load balancers' 60 s, HAProxy's usual 30-50 s,
// Node's fetch 300 s).
const DefaultHeartbeat = 5 * time.Second

// Config configures a Service.
type Config struct {
	// Prefix: paths outside it are refused (403). "" or "/" allows every
	// path zklock accepts.
	Prefix string
	// Tokens maps bearer tokens to caller names. When it is empty, no
	// token is asked for: serve only on loopback or a Unix socket then.
	// SetTokens replaces them while the service runs.
	Tokens map[string]string
	// MaxHolds limits the holdings and waits of one caller (a token's name;
	// "local" without tokens): DefaultMaxHolds when 0.
	MaxHolds int
	// Logger receives the service's own events; silent when nil.
	Logger *slog.Logger
	// Heartbeat is how often every stream (acquire, campaign, watch)
	// writes a line while it waits or holds: DefaultHeartbeat when 0. A
	// caller whose connection cannot take a heartbeat is gone, and its
	// holding is released.
	Heartbeat time.Duration
	// AnyHost skips the Host check (a Unix socket, which no web page can
	// reach). Otherwise a request's Host must be an IP address, localhost,
	// or one of AllowHosts: a page that reaches a loopback service through
	// DNS rebinding sends its own site's name.
	AnyHost bool
	// AllowHosts are host names (without port) accepted in Host besides IP
	// addresses and localhost: the name a proxy or callers use.
	AllowHosts []string
	// AllowOrigins are the Origin values (scheme://host[:port]) accepted;
	// a request carrying any other Origin (a web page's) is refused.
	AllowOrigins []string
	// MaxLeases limits the leases of one caller: DefaultMaxLeases when 0.
	// Each lock a lease holds counts against MaxHolds.
	MaxLeases int
}

// Service answers the HTTP API over one Client. It is safe for concurrent use.
type Service struct {
	c      *zklock.Client
	cfg    Config
	log    *slog.Logger
	seq    atomic.Int64
	ctx    context.Context // ended by Close: every stream releases and ends
	cancel context.CancelFunc
	staged atomic.Pointer[leaseEnd] // nil but in a test

	tokens   atomic.Pointer[tokenSet] // replaced by SetTokens
	tokensMu sync.Mutex               // serializes SetTokens

	mu       sync.Mutex
	byID     map[string]*holding
	byPath   map[string]map[*holding]struct{}
	perCall  map[string]int    // holdings, waits and watches per caller
	lost     map[string]string // ids of holdings ended by a loss: their caller
	lostFIFO []string          // the same ids, oldest first (at most maxLost)
	closed   bool
	lossAt   time.Time      // the latest loss of a holding (not by a token's removal): /healthz proves contact since
	handlers sync.WaitGroup // Add under mu, while not closed

	instance    string            // names this run of the service: the prefix of its lease ids
	leases      map[string]*lease // live leases by id
	leasesOf    map[string]int    // live leases per caller
	endedLeases map[string]*leaseEnded
	endedFIFO   map[string][]string // the same ids by caller, oldest first (at most maxEndedLeases each)
	bg          sync.WaitGroup      // the goroutines of leases' holdings and the session watch
	watchOnce   sync.Once

	proofMu  sync.Mutex
	proofAt  time.Time // the sending of the latest round trip ZooKeeper answered
	proofing *proof    // the round trip in flight, if any
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
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.Heartbeat < 0 {
		return nil, errors.New("lockservice: Heartbeat must not be negative")
	}
	if cfg.MaxLeases == 0 {
		cfg.MaxLeases = DefaultMaxLeases
	}
	if cfg.MaxLeases < 0 {
		return nil, errors.New("lockservice: MaxLeases must not be negative")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{
		c: c, cfg: cfg, log: cfg.Logger, ctx: ctx, cancel: cancel,
		byID: map[string]*holding{}, byPath: map[string]map[*holding]struct{}{}, perCall: map[string]int{},
		lost: map[string]string{}, instance: newID()[:12],
		leases: map[string]*lease{}, leasesOf: map[string]int{}, endedLeases: map[string]*leaseEnded{}, endedFIFO: map[string][]string{},
	}
	s.tokens.Store(newTokenSet(cfg.Tokens))
	return s, nil
}

// Close ends every stream (releasing its lock, or abandoning its wait) and
// waits for them, about one ZooKeeper round trip each; ctx bounds the wait.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.endLeases(codeLost, "the service is stopping; the lease's locks are released at its deadline")
	s.cancel()
	done := make(chan struct{})
	go func() { s.handlers.Wait(); s.bg.Wait(); close(done) }()
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
		{"POST", "/v1/lease/grant", (*Service).leaseGrant},
		{"POST", "/v1/lease/keepalive", (*Service).leaseKeepAlive},
		{"POST", "/v1/lease/acquire", (*Service).leaseAcquire},
		{"POST", "/v1/lease/release", (*Service).leaseRelease},
		{"POST", "/v1/lease/revoke", (*Service).leaseRevoke},
		{"GET", "/v1/lease/holdings", (*Service).leaseHoldings},
		{"GET", "/healthz", (*Service).health},
	}
}

// methodsOf names the methods the route at path takes, "" for no route.
func methodsOf(path string) string {
	var ms []string
	for _, rt := range Routes() {
		if rt.Path == path {
			ms = append(ms, rt.Method)
		}
	}
	return strings.Join(ms, ", ")
}

// Handler returns the service's HTTP handler. Every request but GET
// /healthz passes the browser check first (Host and Origin), then the token.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range Routes() {
		mux.HandleFunc(rt.Method+" "+rt.Path, s.wrap(rt))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if allow := methodsOf(r.URL.Path); allow != "" {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" "+r.URL.Path+": the route takes "+allow)
			return
		}
		writeError(w, http.StatusNotFound, "not_found", "no such route: "+r.Method+" "+r.URL.Path+"; see docs/openapi.json")
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" && !s.fromProgram(w, r) {
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// fromProgram refuses (403) a request a web browser may have sent: one
// carrying an Origin not allowed, or (on TCP) a Host that is not an IP
// address, localhost or an allowed name. After DNS rebinding, a page's
// request to 127.0.0.1 is same-origin, may be JSON, and sends no token the
// service would miss when it asks for none: only its Host (the page's own
// site) and Origin give it away. It returns false after answering.
func (s *Service) fromProgram(w http.ResponseWriter, r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" && !slices.Contains(s.cfg.AllowOrigins, o) {
		if o == "null" { // a sandboxed or file:// page: allowing "null" would let any such page in
			writeError(w, http.StatusForbidden, "forbidden_origin", "requests from web pages (Origin null: a sandboxed or local page) are refused")
			return false
		}
		writeError(w, http.StatusForbidden, "forbidden_origin", "requests from web pages (Origin "+o+") are refused; start the service with --allow-origin "+o+" to accept that page")
		return false
	}
	if s.cfg.AnyHost {
		return true
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if net.ParseIP(host) != nil || strings.EqualFold(host, "localhost") || slices.ContainsFunc(s.cfg.AllowHosts, func(a string) bool { return strings.EqualFold(a, host) }) {
		return true
	}
	writeError(w, http.StatusForbidden, "forbidden_host", "Host "+r.Host+" is not this service's address (an IP address, localhost, or an --allow-host name)")
	return false
}

// wrap authenticates the caller and refuses a POST that is not JSON (which
// a web page could send to a local service without a preflight).
func (s *Service) wrap(rt Route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		cred := s.authenticate(r)
		if rt.Path == "/healthz" { // a probe sends no token
			cred = s.tokens.Load().local
		}
		if cred == nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="zklock"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "missing or unknown bearer token; send Authorization: Bearer <token>")
			return
		}
		if cred.removed() {
			s.refuseRemoved(w, r, rt, cred)
			return
		}
		caller := cred.name
		r = r.WithContext(context.WithValue(r.Context(), credKey{}, cred))
		if r.Method == http.MethodPost && !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			writeError(w, http.StatusUnsupportedMediaType, "unsupported_media_type", "the body must be JSON: send Content-Type: application/json")
			return
		}
		s.mu.Lock()
		closed := s.closed
		if !closed {
			s.handlers.Add(1)
		}
		s.mu.Unlock()
		if closed {
			s.refuseClosing(w, r, rt, caller)
			return
		}
		defer s.handlers.Done()
		rt.handle(s, w, r, caller)
	}
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
