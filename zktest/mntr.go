package zktest

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/zklock/zklock/internal/zkserver"
)

// Mntr is the output of ZooKeeper's `mntr` four-letter command: metric name
// (e.g. "zk_znode_count") to value. Tests use it to observe server-side
// effects (nodes, ephemerals, watches, packets) that a client cannot see.
type Mntr map[string]string

// Keys of mntr (ZooKeeper 3.8) that the accessors read.
const (
	KeyServerState     = "zk_server_state"
	KeyPacketsReceived = "zk_packets_received"
	KeyWatchCount      = "zk_watch_count"
	KeyZnodeCount      = "zk_znode_count"
	KeyEphemeralsCount = "zk_ephemerals_count"
	KeyAliveConns      = "zk_num_alive_connections"
)

// WatchFiredKeys are the mntr summaries of watch notifications, one per event
// type. Each is the total number of watchers a server has triggered for that
// event type (ZooKeeper records the number of watchers fired per triggering
// change; the _sum_ summary adds them up). A change that fires no watcher
// does not count.
var WatchFiredKeys = []string{
	"zk_sum_node_created_watch_count",
	"zk_sum_node_deleted_watch_count",
	"zk_sum_node_changed_watch_count",
	"zk_sum_node_children_watch_count",
}

// Int parses the value of key as a number; floats are truncated. Missing or
// unparsable values are 0.
func (m Mntr) Int(key string) int64 {
	v, ok := m[key]
	if !ok {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return n
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		return int64(f)
	}
	return 0
}

// State is zk_server_state: "standalone", "leader", "follower" or "observer".
func (m Mntr) State() string { return m[KeyServerState] }

// PacketsReceived is zk_packets_received: client packets (requests and
// pings) the server has received since start.
func (m Mntr) PacketsReceived() int64 { return m.Int(KeyPacketsReceived) }

// WatchCount is zk_watch_count: watches currently registered on the server
// (by clients connected to this server).
func (m Mntr) WatchCount() int64 { return m.Int(KeyWatchCount) }

// ZnodeCount is zk_znode_count: all znodes, including the built-in
// /zookeeper subtree.
func (m Mntr) ZnodeCount() int64 { return m.Int(KeyZnodeCount) }

// EphemeralsCount is zk_ephemerals_count: ephemeral znodes in the tree.
func (m Mntr) EphemeralsCount() int64 { return m.Int(KeyEphemeralsCount) }

// AliveConnections is zk_num_alive_connections (including the mntr
// connection itself).
func (m Mntr) AliveConnections() int64 { return m.Int(KeyAliveConns) }

// WatchEventsFired returns how many watch notifications a server sent between
// two mntr snapshots of that server (sum of the WatchFiredKeys deltas). In an
// ensemble, watches fire on the server each client is connected to, so add up
// the deltas of all servers.
func WatchEventsFired(before, after Mntr) int64 {
	var n int64
	for _, k := range WatchFiredKeys {
		n += after.Int(k) - before.Int(k)
	}
	return n
}

// FourLetter sends a four-letter command (ruok, srvr, mntr, ...) to addr and
// returns the raw reply. Without a deadline in ctx it gives up after 5s.
func FourLetter(ctx context.Context, addr, cmd string) (string, error) {
	return zkserver.FourLetter(ctx, addr, cmd)
}

// GetMntr runs mntr against addr and parses the reply.
func GetMntr(ctx context.Context, addr string) (Mntr, error) {
	out, err := FourLetter(ctx, addr, "mntr")
	if err != nil {
		return nil, err
	}
	return mntrReply(addr, out)
}

// mntrReply parses addr's mntr reply, which must hold counters.
func mntrReply(addr, out string) (Mntr, error) {
	m := ParseMntr(out)
	if len(m) == 0 {
		return nil, fmt.Errorf("zktest: unexpected mntr reply from %s: %q", addr, out)
	}
	return m, nil
}

// ParseMntr parses mntr output ("key<TAB>value" lines).
func ParseMntr(out string) Mntr {
	m := Mntr{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "\t")
		if ok {
			m[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return m
}

// ServerMode asks addr for its mode via `srvr` (whitelisted by default, unlike
// mntr): "standalone", "leader", "follower", "observer". A server that is up
// but not in a quorum yields an error.
func ServerMode(ctx context.Context, addr string) (string, error) {
	return zkserver.ServerMode(ctx, addr)
}
