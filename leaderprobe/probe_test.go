package leaderprobe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/leaderprobe"
	"github.com/zklock/zklock/zktest"
)

var cluster *zktest.Cluster

func TestMain(m *testing.M) {
	c, stop, err := zktest.StartMain()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cluster = c
	code := m.Run()
	stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}

const session = 4 * time.Second

func connect(t *testing.T, servers ...string) *zklock.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := zklock.Connect(ctx, servers, zklock.WithSessionTimeout(session))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func get(t *testing.T, url string) (int, leaderprobe.Status) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	var st leaderprobe.Status
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	return resp.StatusCode, st
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLeaderFlipsWhenCutOff: /leader is 200 while this process leads and
// 503 (naming the leader) in a follower; the leader's turns 503 within the
// loss bound (0.8 T) once a proxy cuts it off from ZooKeeper.
func TestLeaderFlipsWhenCutOff(t *testing.T) {
	path := "/zklock-probe-test/leader"
	proxy := zktest.NewProxy(t, cluster.Addrs()...)
	leaderClient, followerClient := connect(t, proxy.Addr()), connect(t, cluster.Addrs()...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	e1, err := leaderClient.NewElection(path)
	require.NoError(t, err)
	p1 := leaderprobe.New(ctx, e1)
	s1 := httptest.NewServer(p1)
	defer s1.Close()
	code, _ := get(t, s1.URL+"/leader")
	require.Equal(t, http.StatusServiceUnavailable, code, "not elected yet")
	ld, err := e1.Campaign(ctx, "10.0.0.1:80")
	require.NoError(t, err)
	p1.Lead(ld)
	code, st := get(t, s1.URL+"/leader")
	require.Equal(t, http.StatusOK, code)
	require.True(t, st.Leading)

	e2, err := followerClient.NewElection(path)
	require.NoError(t, err)
	p2 := leaderprobe.New(ctx, e2)
	s2 := httptest.NewServer(p2)
	defer s2.Close()
	eventually(t, "the follower's probe names the leader", func() bool {
		code, st := get(t, s2.URL+"/leader")
		return code == http.StatusServiceUnavailable && st.Leader != nil && st.Leader.Value == "10.0.0.1:80"
	})
	resp, err := http.Get(s2.URL + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	proxy.Stall()
	defer proxy.Resume()
	cut := time.Now()
	eventually(t, "the cut-off leader's probe says 503", func() bool {
		code, _ := get(t, s1.URL+"/leader")
		return code == http.StatusServiceUnavailable
	})
	require.Less(t, time.Since(cut), session*8/10+500*time.Millisecond, "within the loss bound, 0.8 T")
	_, st = get(t, s1.URL+"/leader")
	require.Contains(t, st.Reason, "lock lost")
}
