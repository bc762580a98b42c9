package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// bareName is the caller name of a token written alone on its line.
func bareName(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "token-" + hex.EncodeToString(sum[:])[:12]
}

// A token written alone on a line is named by a digest of the secret, not
// by its line: any edit that keeps the token (lines or comments added or
// removed above it, blank lines, reordering, spacing) keeps its name; the
// name reveals nothing of the secret; a token given twice under two names
// is refused (issue 54).
func TestPureReadTokensNamesBareTokensByDigest(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	read := func(text string) map[string]string {
		t.Helper()
		writeTokens(t, file, text)
		tokens, msg := readTokens(file)
		require.Empty(t, msg)
		return tokens
	}
	want := map[string]string{"old-secret-0123456789": bareName("old-secret-0123456789"), "new-secret-9876543210": bareName("new-secret-9876543210"), "a-token": "alice"}
	for _, text := range []string{
		"old-secret-0123456789\nnew-secret-9876543210\nalice a-token\n",
		"# rotation under way\nold-secret-0123456789\nnew-secret-9876543210\nalice a-token\n",
		"alice a-token\n\n\nnew-secret-9876543210\n  old-secret-0123456789\t\n",
		"new-secret-9876543210\n# old one below\nold-secret-0123456789\nalice   a-token\n",
	} {
		require.Equal(t, want, read(text), "%q", text)
	}
	require.Equal(t, map[string]string{"new-secret-9876543210": bareName("new-secret-9876543210"), "a-token": "alice"},
		read("new-secret-9876543210\nalice a-token\n"), "the old line removed: the new token keeps its name")
	require.Equal(t, map[string]string{"new-secret-9876543210": bareName("new-secret-9876543210")},
		read("new-secret-9876543210\nnew-secret-9876543210\n"), "the same token twice, the same name")
	for tok, name := range want {
		require.NotContains(t, name, tok)
		require.NotContains(t, tok, name)
	}

	writeTokens(t, file, "a-token\nalice a-token\n")
	_, msg := readTokens(file)
	require.Contains(t, msg, "line 2: the token of line 1 again, under another name")
}

// TestServeTokenFileEditsKeepTheirTokensHoldings: for every edit of
// --token-file that keeps a token (bare or named: a comment, a blank line
// or a new token added above it, the lines reordered or spaced otherwise,
// another token's line removed above it, as in the documented rotation), a
// SIGHUP reload ends nothing taken with it: its stream still holds (no
// "lost") and its lease's keep-alive answers 200 with its lock held. An
// edit that removes a token, or gives it another name, ends exactly its
// holdings: its stream reads "lost" and its lease answers 410 lease_lost,
// while every other token's go on. Neither stderr nor the lock's owner
// record shows a secret (issue 54).
func TestServeTokenFileEditsKeepTheirTokensHoldings(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tokens")
	secrets := map[string]string{ // caller -> token
		"alice": "a-token-4f1c9e",
		"old":   "old-secret-0123456789",
		"new":   "new-secret-9876543210",
		"spare": "spare-secret-55aa",
	}
	line := func(who string) string {
		if who == "alice" {
			return "alice " + secrets[who]
		}
		return secrets[who]
	}
	writeTokens(t, file, strings.Join([]string{line("old"), line("alice"), line("spare")}, "\n")+"\n")
	p := start(t, "serve", "--listen", "127.0.0.1:0", "--token-file", file, "--heartbeat", "200ms", "--session-timeout", "30s")
	base := "http://" + httpAddrOf(t, p.stdout, "listening on http://")
	zk := connect(t)

	type holder struct {
		who    string
		stream <-chan string
		path   string // the stream's lock
		lease  string
		leased string // the lease's lock
		ended  bool
	}
	holders := map[string]*holder{}
	take := func(who string) {
		t.Helper()
		c := serveCaller{base, secrets[who]}
		h := &holder{who: who, path: lockPath(t), leased: lockPath(t)}
		code, body := c.call(t, "POST", "/v1/lease/grant", `{"ttl":"9s"}`)
		require.Equal(t, http.StatusOK, code, body)
		h.lease = body["lease"].(string)
		code, body = c.call(t, "POST", "/v1/lease/acquire", `{"lease":"`+h.lease+`","path":"`+h.leased+`","try":true}`)
		require.Equal(t, http.StatusOK, code, body)
		h.stream = c.lines(t, `{"path":"`+h.path+`"}`)
		require.Contains(t, nextLine(t, h.stream), `"event":"granted"`)
		holders[who] = h
	}
	for _, who := range []string{"alice", "old", "spare"} {
		take(who)
	}
	reloads := 0
	steps := []struct {
		name   string
		lines  []string
		change string   // the reload's counts on stderr
		ended  []string // whose holdings the reload ends
		takes  []string // who takes a stream and a lease after it
	}{
		{"a comment added above every token",
			[]string{"# zklock serve's callers", line("old"), line("alice"), line("spare")}, "3 tokens, 0 added, 0 removed", nil, nil},
		{"rotation, step 1: the new token added below the old one",
			[]string{"# zklock serve's callers", line("old"), line("new"), line("alice"), line("spare")}, "4 tokens, 1 added, 0 removed", nil, []string{"new"}},
		{"blank lines, spacing and order changed",
			[]string{"", "  " + line("spare") + "\t", "# callers", "alice\t" + secrets["alice"], "", line("new"), line("old")}, "4 tokens, 0 added, 0 removed", nil, nil},
		{"a comment and a line added above the new token",
			[]string{"# callers", line("spare"), line("alice"), line("old"), "# rotated today", "extra-secret-xyz", line("new")}, "5 tokens, 1 added, 0 removed", nil, nil},
		{"rotation, step 2: the old token's line removed, above the new one",
			[]string{"# callers", line("spare"), line("alice"), "# rotated today", "extra-secret-xyz", line("new")}, "4 tokens, 0 added, 1 removed", []string{"old"}, nil},
		{"a line above removed, and alice's token given another name",
			[]string{line("spare"), "alicia " + secrets["alice"], line("new")}, "3 tokens, 1 added, 2 removed", []string{"alice"}, nil},
		{"the first line removed",
			[]string{line("new")}, "1 tokens, 0 added, 2 removed", []string{"spare"}, nil},
	}
	for i, s := range steps {
		writeTokens(t, file, strings.Join(s.lines, "\n")+"\n")
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGHUP))
		reloads++
		eventually(t, "the reload said on stderr", func() bool {
			return strings.Count(p.errText(), "zklock: SIGHUP: ") == reloads
		})
		ends := map[string]bool{}
		for _, who := range s.ended {
			ends[who] = true
			h := holders[who]
			lost := nextLine(t, h.stream)
			require.Contains(t, lost, `"event":"lost"`, "step %d (%s): %s's stream", i+1, s.name, who)
			require.Contains(t, lost, "token was removed")
			code, body := serveCaller{base, secrets[who]}.call(t, "POST", "/v1/lease/keepalive", `{"lease":"`+h.lease+`"}`)
			if strings.Contains(strings.Join(s.lines, "\n"), secrets[who]) {
				// given another name: a new caller, whom the old name's lease is not
				require.Equal(t, http.StatusNotFound, code, "step %d (%s): %s's lease: %v", i+1, s.name, who, body)
				require.Equal(t, "not_found", body["code"])
			} else {
				require.Equal(t, http.StatusGone, code, "step %d (%s): %s's lease: %v", i+1, s.name, who, body)
				require.Equal(t, "lease_lost", body["code"])
			}
			h.ended = true
		}
		time.Sleep(600 * time.Millisecond) // three heartbeats: a stream the reload ended would have said so
		for who, h := range holders {
			if h.ended {
				continue
			}
			select {
			case l, ok := <-h.stream:
				t.Fatalf("step %d (%s): the reload kept %s's token but its stream went on with %q (open: %v)", i+1, s.name, who, l, ok)
			default:
			}
			code, body := serveCaller{base, secrets[who]}.call(t, "POST", "/v1/lease/keepalive", `{"lease":"`+h.lease+`"}`)
			require.Equal(t, http.StatusOK, code, "step %d (%s): the reload kept %s's token but ended its lease: %v", i+1, s.name, who, body)
			require.Contains(t, fmt.Sprint(body["holdings"]), "path:"+h.leased+" ", "step %d (%s): %s's leased lock", i+1, s.name, who)
			require.NotContains(t, fmt.Sprint(body["holdings"]), "lost:true", "step %d (%s): %s's leased lock", i+1, s.name, who)
			waitQueue(t, zk, h.path, 1)
		}
		require.Contains(t, p.errText(), "reloaded --token-file "+file+": "+s.change, "step %d (%s)", i+1, s.name)
		for _, who := range s.takes {
			take(who)
		}
		t.Logf("step %d (%s): %s; ended: %v", i+1, s.name, s.change, s.ended)
	}

	// The owner record of a bare token's lock names the digest, not the secret.
	code, body := serveCaller{base, secrets["new"]}.call(t, "GET", "/v1/lock/status?path="+holders["new"].path, "")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, fmt.Sprint(body), "owner:"+bareName(secrets["new"])+" ")
	require.NotContains(t, fmt.Sprint(body), secrets["new"])

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, exitOK, p.wait(t, 20*time.Second), p.errText())
	for who, tok := range secrets {
		require.NotContains(t, p.errText(), tok, "%s's token on stderr", who)
		require.NotContains(t, p.outText(), tok, "%s's token on stdout", who)
	}
}
