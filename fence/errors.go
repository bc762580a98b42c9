package fence

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

var (
	// ErrStale: a holder with a larger token has written or claimed the
	// fence. The transaction must be rolled back; the holder has lost its
	// lock. Errors matching it are *StaleError.
	ErrStale = errors.New("zklock: fence: stale token")
	// ErrBadName: the fence name is empty, longer than 255 bytes or not
	// UTF-8. Nothing was written.
	ErrBadName = errors.New("zklock: fence: bad name")
	// ErrBadToken: the token is not positive (zklock's tokens are). Nothing
	// was written.
	ErrBadToken = errors.New("zklock: fence: bad token")
	// ErrNotInstalled: the fence's table or check is missing from the
	// database: run Install (or docs/fencing.md's SQL) first.
	ErrNotInstalled = errors.New("zklock: fence: not installed")
)

// StaleError says which token was refused and which larger one had written.
type StaleError struct {
	Name  string // the fence
	Token int64  // the token refused
	Seen  int64  // the largest token the fence has seen, 0 if unknown
	err   error  // the store's own error, if any
}

func (e *StaleError) Error() string {
	if e.Seen == 0 {
		return fmt.Sprintf("zklock: fence: stale token %d for %q: a larger token has written", e.Token, e.Name)
	}
	return fmt.Sprintf("zklock: fence: stale token %d for %q: token %d has written", e.Token, e.Name, e.Seen)
}

// Is makes errors.Is(err, ErrStale) true.
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// Unwrap returns the store's own error (the driver's), if any.
func (e *StaleError) Unwrap() error { return e.err }

// staleText is what the server-side checks raise (the SQL in Install):
// "zklock_fence: stale token T (seen S) for NAME", or SQLite's bare
// "zklock_fence: stale token".
var staleText = regexp.MustCompile(`zklock_fence: stale token(?: \d+ \(seen (\d+)\))?`)

// asStale turns a store's refusal into a *StaleError; other errors pass.
func asStale(err error, name string, token int64) error {
	if err == nil {
		return nil
	}
	m := staleText.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	seen, _ := strconv.ParseInt(m[1], 10, 64)
	return &StaleError{Name: name, Token: token, Seen: seen, err: err}
}

// missingText: how the stores say a table, function or procedure is missing.
var missingText = []string{"does not exist", "doesn't exist", "no such table", "no such function"}

// asMissing marks a store's "zklock_fence ... does not exist" as
// ErrNotInstalled, keeping the store's error.
func asMissing(err error) error {
	if err == nil || !strings.Contains(err.Error(), "zklock_fence") {
		return err
	}
	for _, s := range missingText {
		if strings.Contains(err.Error(), s) {
			return fmt.Errorf("%w (run Install): %w", ErrNotInstalled, err)
		}
	}
	return err
}

// checkInput rejects what no store should see.
func checkInput(name string, token int64) error {
	if name == "" || len(name) > 255 || !utf8.ValidString(name) || strings.ContainsRune(name, 0) {
		return fmt.Errorf("%w %q: want 1 to 255 bytes of UTF-8, no NUL", ErrBadName, name)
	}
	if token <= 0 {
		return fmt.Errorf("%w %d: want a positive token (zklock.Lease.Token)", ErrBadToken, token)
	}
	return nil
}
