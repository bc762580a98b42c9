package zklock

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPureEnsembleConfig: which /zookeeper/config bodies the client may
// follow, and the client addresses it reads from them.
func TestPureEnsembleConfig(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       []string // nil: not followable
		version    string
	}{
		{"reconfigurable", "server.1=10.0.0.1:2888:3888:participant;10.0.0.1:2181\nserver.2=10.0.0.2:2888:3888:observer;10.0.0.2:2182\nversion=100000000\n",
			[]string{"10.0.0.1:2181", "10.0.0.2:2182"}, "100000000"},
		{"names and IPv6", "server.1=a:1:2;zk1.example:2181\nserver.2=b:1:2;[::1]:2181\n", []string{"zk1.example:2181", "[::1]:2181"}, ""},
		{"no client address (static config)", "server.1=10.0.0.1:2888:3888:participant\nversion=0\n", nil, ""},
		{"one server without", "server.1=a:1:2;10.0.0.1:2181\nserver.2=b:1:2\n", nil, ""},
		{"port only: the wildcard", "server.1=a:1:2;2181\n", nil, ""},
		{"wildcard host", "server.1=a:1:2;0.0.0.0:2181\n", nil, ""},
		{"IPv6 wildcard", "server.1=a:1:2;[::]:2181\n", nil, ""},
		{"empty (standalone)", "", nil, ""},
		{"junk", "server.1\n=\nversion\n", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, ok := parseEnsembleConfig([]byte(tc.body))
			if tc.want == nil {
				require.False(t, ok, "%+v", cfg)
				return
			}
			require.True(t, ok)
			require.Equal(t, tc.want, cfg.clients)
			require.Equal(t, tc.version, cfg.version)
		})
	}
}

// TestPureEnsembleConfigFollowable: a client follows only when every
// address it was given is one the configuration lists.
func TestPureEnsembleConfigFollowable(t *testing.T) {
	cfg := ensembleConfig{clients: []string{"10.0.0.1:2181", "10.0.0.2:2181", "10.0.0.3:2181"}}
	require.True(t, cfg.followable([]string{"10.0.0.1:2181"}))
	require.True(t, cfg.followable([]string{"10.0.0.3:2181", "10.0.0.1:2181"}))
	require.False(t, cfg.followable([]string{"zk.example:2181"}), "a name the config does not use (a load balancer)")
	require.False(t, cfg.followable([]string{"10.0.0.1:2181", "10.0.0.9:2181"}))
	require.False(t, cfg.followable(nil))
}

// FuzzEnsembleConfig: any body parses without panicking, and what is
// followable lists only dialable host:port addresses.
func FuzzEnsembleConfig(f *testing.F) {
	f.Add("server.1=10.0.0.1:2888:3888:participant;10.0.0.1:2181\nversion=1\n")
	f.Add("server.1=a;b;c\n")
	f.Add("server.1=a:1:2;[::1]:2181\n")
	f.Fuzz(func(t *testing.T, body string) {
		cfg, ok := parseEnsembleConfig([]byte(body))
		if !ok {
			return
		}
		require.NotEmpty(t, cfg.clients)
		for _, a := range cfg.clients {
			again, ok := clientAddress("x;" + a)
			require.True(t, ok, "%q", a)
			require.Equal(t, a, again)
		}
	})
}
