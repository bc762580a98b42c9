package zklock

import (
	"errors"
	"strings"
	"testing"
)

func TestPureParseServers(t *testing.T) {
	good := map[string][]string{
		"127.0.0.1:2181":       {"127.0.0.1:2181"},
		"a:1,b:2":              {"a:1", "b:2"},
		" a:1 , b:2 ":          {"a:1", "b:2"},
		"zk1":                  {"zk1:2181"},
		"[::1]:2181":           {"[::1]:2181"},
		"[::1]":                {"[::1]:2181"},
		"zk.example.com:65535": {"zk.example.com:65535"},
	}
	for in, want := range good {
		got, err := parseServers([]string{in})
		if err != nil || strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("parseServers(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "a,,b", "127.0.0.1:abc", "127.0.0.1:0", "127.0.0.1:70000", ":2181", "a:1/app", "a b:1", "a:1:2"} {
		_, err := parseServers([]string{in})
		if !errors.Is(err, ErrInvalidOption) {
			t.Errorf("parseServers(%q): err %v, want ErrInvalidOption", in, err)
		}
	}
	if _, err := parseServers(nil); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("no servers: %v", err)
	}
}

// FuzzParseServers: whatever parseServers accepts is a list of host:port
// addresses go-zookeeper takes as they are.
func FuzzParseServers(f *testing.F) {
	for _, s := range []string{"127.0.0.1:2181", "a,,b", "[::1]", "x:99999", "h:1,h:2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		addrs, err := parseServers([]string{s})
		if err != nil {
			if !errors.Is(err, ErrInvalidOption) {
				t.Fatalf("error %v does not match ErrInvalidOption", err)
			}
			return
		}
		for _, a := range addrs {
			if _, err := parseServer(a); err != nil || strings.Contains(a, ",") {
				t.Fatalf("accepted %q as %q, which does not parse again: %v", s, a, err)
			}
		}
	})
}
