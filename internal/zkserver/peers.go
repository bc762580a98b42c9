package zkserver

import "fmt"

// PeerLink names one directed server-to-server connection: server From
// dialing server To's quorum port (where a follower reaches the leader), or
// its election port (Election), which To binds at Port. From and To are
// indexes into Cluster.Servers.
type PeerLink struct {
	From, To int
	Election bool
	Port     int
}

// serverLine is the "server.N=" line of zoo.cfg that s writes for o. Its own
// line keeps its real ports, since those are what it binds; a peer's ports
// go through Config.PeerPort, so that every connection s makes to a peer can
// be routed through a proxy. ZooKeeper dials a peer at the address its own
// config names (a learner finding its leader, the election's connectOne),
// and with reconfig disabled (its default) the servers never compare their
// views, so configs that differ in peers' ports are accepted.
//
// With PeerPort, a server's own line binds the wildcard address. The one
// connection ZooKeeper does not make from its config is the election's
// reply: a server that receives an election connection from a lower id
// drops it and dials back the election address that the lower id sent in
// its first message, which is the address of the lower id's own line, and
// so would bypass the proxy. ZooKeeper ignores a wildcard address there
// (QuorumCnxManager.InitialMessage.parse) and dials from its config
// instead. The cost is that the quorum and election ports listen on every
// interface, not only on loopback; the client port stays on loopback.
func (s *Server) serverLine(o *Server) (string, error) {
	host, quorum, election := "127.0.0.1", o.quorumPort, o.electionPort
	hook := s.c.cfg.PeerPort
	if hook != nil && o == s {
		host = "0.0.0.0"
	}
	if hook != nil && o != s {
		var err error
		if quorum, err = hook(PeerLink{From: s.index, To: o.index, Port: quorum}); err != nil {
			return "", fmt.Errorf("zktest: quorum port of server %d for server %d: %w", o.id, s.id, err)
		}
		if election, err = hook(PeerLink{From: s.index, To: o.index, Election: true, Port: election}); err != nil {
			return "", fmt.Errorf("zktest: election port of server %d for server %d: %w", o.id, s.id, err)
		}
	}
	role := ""
	if o.observer {
		role = ":observer"
	}
	return fmt.Sprintf("server.%d=%s:%d:%d%s\n", o.id, host, quorum, election, role), nil
}
