package wire

import (
	"slices"
	"sync"

	"github.com/go-zookeeper/zk"
)

// members is the list of servers go-zookeeper dials: its DNS host provider
// (names resolved, order shuffled), which the client replaces when the
// ensemble's membership changes (a reconfig). A replacement takes effect at
// the next dial; the connection of the moment is left alone.
type members struct {
	mu      sync.Mutex
	p       *zk.DNSHostProvider
	servers []string // as given, before resolution
}

func newMembers() *members { return &members{p: zk.NewDNSHostProvider()} }

func (m *members) Init(servers []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.servers = slices.Clone(servers)
	return m.p.Init(servers)
}

func (m *members) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.p.Len()
}

func (m *members) Next() (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.p.Next()
}

func (m *members) Connected() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.p.Connected()
}

// replace makes servers the list the next dials go through. The names are
// resolved first, outside the lock; a list that does not resolve is
// refused and the old one kept.
func (m *members) replace(servers []string) error {
	p := zk.NewDNSHostProvider()
	if err := p.Init(servers); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.p, m.servers = p, slices.Clone(servers)
	return nil
}

func (m *members) list() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.servers)
}
