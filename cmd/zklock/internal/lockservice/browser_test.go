package lockservice_test

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock/cmd/zklock/internal/lockservice"
)

// rawCall sends one request with the given Host and Origin headers (empty:
// none) and returns the status and body.
func (s *served) rawCall(t *testing.T, method, route, host, origin, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+route, strings.NewReader(body))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if host != "" {
		req.Host = host
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK { // a stream: its first line
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		require.NoError(t, err)
		return resp.StatusCode, line
	}
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// TestBrowserKeptOut: the request a web page makes after DNS rebinding
// (its own site's Host and Origin, JSON, to a loopback service with no
// token) is refused on every route but /healthz, before authentication; so
// is a forged Host alone, and an Origin alone. Programs (no Origin, an IP
// or localhost Host) and allowed names pass.
func TestBrowserKeptOut(t *testing.T) {
	t.Parallel()
	s := serve(t, lockservice.Config{AllowHosts: []string{"locks.internal"}, AllowOrigins: []string{"https://ops.example"}})
	p := lockPath(t)
	acquire := `{"path":"` + p + `","try":true}`
	const site, page = "evil.example:7070", "http://evil.example:7070"
	for _, rt := range lockservice.Routes() {
		if rt.Path == "/healthz" {
			continue
		}
		route, body := rt.Path, ""
		if rt.Method == "GET" {
			route += "?path=" + p
		} else {
			body = `{}`
		}
		for _, tc := range []struct{ name, host, origin, code string }{
			{"rebinding", site, page, "forbidden_origin"},
			{"forged Host", site, "", "forbidden_host"},
			{"foreign Origin", "", page, "forbidden_origin"},
		} {
			code, got := s.rawCall(t, rt.Method, route, tc.host, tc.origin, body)
			require.Equal(t, http.StatusForbidden, code, "%s %s, %s: %s", rt.Method, rt.Path, tc.name, got)
			require.Contains(t, got, `"code":"`+tc.code+`"`, "%s %s, %s", rt.Method, rt.Path, tc.name)
			checkSchemaJSON(t, "ErrorResponse", []byte(got))
		}
	}
	// The rebinding request itself, as the issue saw it granted: refused,
	// and nothing was taken.
	code, got := s.rawCall(t, "POST", "/v1/lock/acquire", site, page, acquire)
	require.Equal(t, http.StatusForbidden, code, got)
	waitQueue(t, s.client, p, 0)
	// Before authentication: a service with tokens says 403, not 401.
	st := serve(t, lockservice.Config{Tokens: map[string]string{"s3cret": "app"}})
	st.token = ""
	code, got = st.rawCall(t, "POST", "/v1/lock/acquire", site, page, acquire)
	require.Equal(t, http.StatusForbidden, code, got)

	// /healthz answers a probe whatever its Host.
	code, got = s.rawCall(t, "GET", "/healthz", site, "", "")
	require.Equal(t, http.StatusOK, code, got)

	// Programs pass: an IP Host (the default), localhost, an allowed name,
	// an allowed Origin.
	port := s.url[strings.LastIndex(s.url, ":"):]
	for _, tc := range []struct{ host, origin string }{
		{"", ""}, {"localhost" + port, ""}, {"LOCALHOST", ""}, {"[::1]" + port, ""}, {"locks.internal", ""}, {"", "https://ops.example"},
	} {
		code, got := s.rawCall(t, "POST", "/v1/lock/acquire", tc.host, tc.origin, acquire)
		require.Equal(t, http.StatusOK, code, "Host %q Origin %q: %s", tc.host, tc.origin, got)
		require.Contains(t, got, `"event":"granted"`)
		waitQueue(t, s.client, p, 0) // the request ended: released
	}
}
