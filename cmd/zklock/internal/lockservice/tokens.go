package lockservice

// Tokens and their reload. Every request is made with a credential: a
// bearer token and its caller's name (or "local" when the service asks for
// none). What a request obtains (a stream's wait or holding, a watch, a
// lease and its locks) lasts no longer than its credential: SetTokens ends
// a credential whose token it no longer lists (or lists under another
// name), and with it
//   - each stream that holds: "lost" is written, then the lock released;
//   - each stream that waits: "failed" (code "failed") ends the wait;
//   - each watch, which ends;
//   - each lease, at once: every later call with it answers 410
//     lease_lost saying the token was removed, and its locks are released
//     at its deadline (at most its TTL later): by the caller's rule it may
//     work until then, and nobody else can be granted them before.
// A request with a removed token is refused (401) but for a call with a
// lease that the removal ended, which answers how it ended.

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"slices"
	"strings"
)

// credential is one token and its caller's name. ctx ends when a reload
// removes the token: everything obtained with it ends.
type credential struct {
	token, name string
	ctx         context.Context
	cancel      context.CancelFunc // nil for the "local" credential, which never ends
}

// removed reports whether a reload removed c's token.
func (c *credential) removed() bool { return c.ctx.Err() != nil }

// tokenSet is the service's tokens: the live ones, and those removed
// (remembered, at most maxRemovedTokens, so that calls with the leases
// they ended answer how).
type tokenSet struct {
	live        []*credential // empty: no token is asked for
	removed     []*credential // oldest first
	local       *credential   // the caller when live is empty
	liveByToken map[string]*credential
}

// maxRemovedTokens bounds how many removed tokens the service remembers.
const maxRemovedTokens = 1024

// errTokenRemoved is the loss of a holding whose caller's token was removed.
var errTokenRemoved = errors.New("zklock: the caller's token was removed from the service's --token-file")

// tokenRemovedReason is what a lease ended by its token's removal says.
const tokenRemovedReason = "the caller's token was removed from the service's --token-file at a reload; the lease's locks are released at its deadline"

type credKey struct{}

// credOf returns the credential wrap authenticated r with.
func credOf(r *http.Request) *credential {
	c, _ := r.Context().Value(credKey{}).(*credential)
	return c
}

// newTokenSet builds the credentials of tokens (token -> name).
func newTokenSet(tokens map[string]string) *tokenSet {
	ts := &tokenSet{local: &credential{name: "local", ctx: context.Background()}, liveByToken: map[string]*credential{}}
	for tok, name := range tokens {
		ctx, cancel := context.WithCancel(context.Background())
		c := &credential{token: tok, name: name, ctx: ctx, cancel: cancel}
		ts.live = append(ts.live, c)
		ts.liveByToken[tok] = c
	}
	return ts
}

// authenticate returns r's credential: its bearer token's (live, or
// removed), or "local" when the service asks for no token; nil when the
// token is missing or unknown.
func (s *Service) authenticate(r *http.Request) *credential {
	ts := s.tokens.Load()
	if len(ts.live) == 0 {
		return ts.local
	}
	scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") { // the scheme is case-insensitive (RFC 7235)
		return nil
	}
	got = strings.TrimLeft(got, " ")
	var found *credential
	for _, set := range [][]*credential{ts.live, ts.removed} {
		for _, c := range set {
			if subtle.ConstantTimeCompare([]byte(c.token), []byte(got)) == 1 && found == nil {
				found = c
			}
		}
	}
	return found
}

// TokenChange is what SetTokens changed.
type TokenChange struct {
	Tokens, Added, Removed int
}

// SetTokens replaces the service's tokens (token -> caller name; at least
// one) at once: a token it adds is accepted by the next request, and one it
// no longer lists, or lists under another name, ends what was obtained with
// it (see the top of tokens.go).
func (s *Service) SetTokens(tokens map[string]string) (TokenChange, error) {
	if len(tokens) == 0 {
		return TokenChange{}, errors.New("zklock: no tokens: a service that asked for tokens keeps asking for them")
	}
	s.tokensMu.Lock()
	defer s.tokensMu.Unlock()
	old := s.tokens.Load()
	next := &tokenSet{local: old.local, liveByToken: map[string]*credential{}}
	change := TokenChange{Tokens: len(tokens)}
	var gone []*credential
	for tok, name := range tokens {
		c := old.liveByToken[tok]
		if c == nil || c.name != name {
			ctx, cancel := context.WithCancel(context.Background())
			c = &credential{token: tok, name: name, ctx: ctx, cancel: cancel}
			change.Added++
		}
		next.live = append(next.live, c)
		next.liveByToken[tok] = c
	}
	if len(old.live) == 0 {
		gone = append(gone, old.local)
	}
	for _, c := range old.live {
		if next.liveByToken[c.token] != c {
			gone = append(gone, c)
		}
	}
	change.Removed = len(gone)
	next.removed = slices.DeleteFunc(append(slices.Clone(old.removed), gone...), func(c *credential) bool {
		return c.cancel == nil || next.liveByToken[c.token] != nil // "local", or given again
	})
	if n := len(next.removed) - maxRemovedTokens; n > 0 {
		next.removed = next.removed[n:]
	}
	s.tokens.Store(next)
	for _, c := range gone {
		s.endCredential(c)
	}
	return change, nil
}

// endCredential ends everything obtained with c: its streams and watches
// (through c.ctx), and its leases. A lease registered concurrently either
// is registered before the sweep below, or sees c removed (leaseGrant
// checks under s.mu).
func (s *Service) endCredential(c *credential) {
	if c.cancel != nil {
		c.cancel()
	}
	s.log.Info("token removed: its caller's leases and streams end", "caller", c.name)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.leases {
		if l.cred == c {
			s.endLeaseLocked(l, codeLost, tokenRemovedReason)
		}
	}
}

// refuseRemoved answers a request made with a removed token: a call with a
// lease its removal ended answers 410 with how it ended, anything else 401.
func (s *Service) refuseRemoved(w http.ResponseWriter, r *http.Request, rt Route, c *credential) {
	id := leaseOf(w, r, rt)
	s.mu.Lock()
	e := s.endedLeases[id]
	s.mu.Unlock()
	if e != nil && e.cred == c {
		writeEnded(w, id, e)
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="zklock", error="invalid_token"`)
	writeError(w, http.StatusUnauthorized, "unauthorized", "this bearer token was removed from the service's --token-file; what was taken with it has ended")
}
