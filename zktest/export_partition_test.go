package zktest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// PartitionProxies returns how many link proxies a cluster started
// WithPartitions holds, and how many of them point at a port a server binds
// now (the ports of its own line of its zoo.cfg).
func PartitionProxies(c *Cluster) (all, current int, err error) {
	live := map[string]bool{}
	for _, s := range c.servers {
		b, err := os.ReadFile(filepath.Join(s.Dir(), "zoo.cfg"))
		if err != nil {
			return 0, 0, err
		}
		prefix := fmt.Sprintf("server.%d=", s.ID())
		for _, l := range strings.Split(string(b), "\n") {
			if addr, ok := strings.CutPrefix(l, prefix); ok {
				_, ports, _ := strings.Cut(addr, ":") // the host is 0.0.0.0
				q, e, _ := strings.Cut(ports, ":")
				live["127.0.0.1:"+q], live["127.0.0.1:"+e] = true, true
			}
		}
	}
	c.parts.mu.Lock()
	defer c.parts.mu.Unlock()
	for _, px := range c.parts.proxies {
		all++
		if live[px.targets[0]] {
			current++
		}
	}
	return all, current, nil
}
