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
		got, chroot, err := parseServers([]string{in})
		if err != nil || strings.Join(got, ",") != strings.Join(want, ",") || chroot != "" {
			t.Errorf("parseServers(%q) = %v, %q, %v; want %v", in, got, chroot, err, want)
		}
	}
	// ZooKeeper's connect string: the chroot is the suffix from the first '/'.
	chroots := []struct {
		in     []string
		addrs  string
		chroot string
	}{
		{[]string{"a:1/app"}, "a:1", "/app"},
		{[]string{"127.0.0.1:2181,127.0.0.1:2182/app"}, "127.0.0.1:2181,127.0.0.1:2182", "/app"},
		{[]string{"a:1", "b:2/x/y"}, "a:1,b:2", "/x/y"},
		{[]string{"zk1/app"}, "zk1:2181", "/app"},
		{[]string{"[::1]:2181/app"}, "[::1]:2181", "/app"},
		{[]string{"a:1/"}, "a:1", ""}, // "/" is no chroot, as in the Java client
		{[]string{"a:1/app "}, "a:1", "/app"},
	}
	for _, tc := range chroots {
		got, chroot, err := parseServers(tc.in)
		if err != nil || strings.Join(got, ",") != tc.addrs || chroot != tc.chroot {
			t.Errorf("parseServers(%q) = %v, %q, %v; want %s, %q", tc.in, got, chroot, err, tc.addrs, tc.chroot)
		}
	}
	for _, in := range []string{"", "a,,b", "127.0.0.1:abc", "127.0.0.1:0", "127.0.0.1:70000", ":2181", "a b:1", "a:1:2",
		"a:1/app/", "a:1//app", "a:1/app,b:2", "a:1/zookeeper", "a:1/a/../b", "/app", "a:1,/app", "a:1/a\x00b"} {
		_, _, err := parseServers([]string{in})
		if !errors.Is(err, ErrInvalidOption) {
			t.Errorf("parseServers(%q): err %v, want ErrInvalidOption", in, err)
		}
	}
	if _, _, err := parseServers([]string{"a:1/app", "b:2"}); !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "last address") {
		t.Errorf("a chroot before the last address: %v", err)
	}
	if _, _, err := parseServers(nil); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("no servers: %v", err)
	}
}

// FuzzParseServers: whatever parseServers accepts is a list of host:port
// addresses go-zookeeper takes as they are, and a chroot that is "" or a
// valid lock path; the connect string rebuilt from them parses the same.
func FuzzParseServers(f *testing.F) {
	for _, s := range []string{"127.0.0.1:2181", "a,,b", "[::1]", "x:99999", "h:1,h:2", "h:1,h:2/app", "h/a/b", "h:1/", "h:1/a,h:2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		addrs, chroot, err := parseServers([]string{s})
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
		if chroot != "" {
			if err := validatePath(chroot); err != nil {
				t.Fatalf("accepted %q with chroot %q: %v", s, chroot, err)
			}
		}
		again, chroot2, err := parseServers([]string{strings.Join(addrs, ",") + chroot})
		if err != nil || strings.Join(again, ",") != strings.Join(addrs, ",") || chroot2 != chroot {
			t.Fatalf("%q: rebuilt as %v %q, which parses as %v %q, %v", s, addrs, chroot, again, chroot2, err)
		}
	})
}
