package fence

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestPureStaleTextOfEachStore(t *testing.T) {
	for _, text := range []string{
		`ERROR: zklock_fence: stale token 5 (seen 9) for /jobs/a (SQLSTATE P0001)`, // pgx
		`Error 1644 (45000): zklock_fence: stale token 5 (seen 9)`,                 // go-sql-driver/mysql
	} {
		err := asStale(errors.New(text), "/jobs/a", 5)
		var stale *StaleError
		if !errors.As(err, &stale) || stale.Seen != 9 || stale.Token != 5 || !errors.Is(err, ErrStale) {
			t.Errorf("%q: %v, want a StaleError seeing 9", text, err)
		}
	}
	err := asStale(errors.New("zklock_fence: stale token (19)"), "x", 5) // SQLite's constant text
	if !errors.Is(err, ErrStale) || err.(*StaleError).Seen != 0 {
		t.Errorf("SQLite's text: %v", err)
	}
	other := errors.New(`ERROR: relation "zklock_fence" does not exist`)
	if asStale(other, "x", 5) != other || !errors.Is(asMissing(other), ErrNotInstalled) {
		t.Errorf("a missing table is not a stale token but not installed")
	}
	if mine := errors.New(`relation "reports" does not exist`); asMissing(mine) != mine {
		t.Errorf("another table's absence is not the fence's")
	}
}

func TestPureInputRules(t *testing.T) {
	for _, c := range []struct {
		name  string
		token int64
		want  error
	}{
		{"/jobs/a", 1, nil}, {"", 1, ErrBadName}, {strings.Repeat("a", 256), 1, ErrBadName},
		{strings.Repeat("a", 255), 1, nil}, {"a\x00b", 1, ErrBadName}, {"\xff", 1, ErrBadName},
		{"/jobs/a", 0, ErrBadToken}, {"/jobs/a", -3, ErrBadToken},
	} {
		if err := checkInput(c.name, c.token); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("checkInput(%.20q, %d) = %v, want %v", c.name, c.token, err, c.want)
		}
	}
}

// FuzzStaleText: whatever a store says, asStale keeps it (as the error or
// wrapped) and reads back the token seen from the server-side check's text.
func FuzzStaleText(f *testing.F) {
	f.Add("ERROR: boom", int64(5), int64(9))
	f.Add("zklock_fence: stale token", int64(1), int64(2))
	f.Fuzz(func(t *testing.T, prefix string, token, seen int64) {
		if token <= 0 || seen <= 0 {
			return
		}
		src := errors.New(prefix)
		if err := asStale(src, "n", token); err != src && !errors.Is(err, src) {
			t.Fatalf("asStale lost the store's error %q: %v", prefix, err)
		}
		text := fmt.Sprintf("%s zklock_fence: stale token %d (seen %d) for n", prefix, token, seen)
		var stale *StaleError
		if !errors.As(asStale(errors.New(text), "n", token), &stale) {
			t.Fatalf("%q not read as stale", text)
		}
		if !strings.Contains(prefix, "zklock_fence: stale token") && stale.Seen != seen {
			t.Fatalf("%q: seen %d, want %d", text, stale.Seen, seen)
		}
	})
}

// FuzzCleanHolder: any holder becomes one every store takes.
func FuzzCleanHolder(f *testing.F) {
	f.Add("host:123")
	f.Add(strings.Repeat("é", 200))
	f.Fuzz(func(t *testing.T, h string) {
		c := cleanHolder(h)
		if len(c) > 255 || !utf8.ValidString(c) || strings.ContainsRune(c, 0) {
			t.Fatalf("cleanHolder(%q) = %q", h, c)
		}
	})
}
