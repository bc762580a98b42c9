package lockservice

import (
	"context"
	"fmt"
	"net/http"
	"strings"
)

// Peer is what the operating system says of a caller on a Unix socket (its
// SO_PEERCRED): the process that connected, and its user.
type Peer struct {
	PID, UID int
}

type peerKey struct{}

// ContextWithPeer returns ctx carrying a connection's Peer, for
// http.Server.ConnContext: the owner records of that connection's holdings
// name the process and the user.
func ContextWithPeer(ctx context.Context, p Peer) context.Context {
	return context.WithValue(ctx, peerKey{}, p)
}

// ownerName is the owner record's name of a holding: the name the caller
// gave (or its own: its token's name, or "local"; with a token, its name
// follows any other the caller gave), then who it is, so that
// an operator reading 'zklock status' can tell which process holds. The
// record's own host and pid are the service's (every holding of the service
// shares its ZooKeeper session); the caller is the host and pid it says it
// is, else the peer process and user of a Unix socket, else the remote
// address of a TCP connection.
func ownerName(r *http.Request, caller, owner, host string, pid int) string {
	switch {
	case owner == "":
		owner = caller
	case owner != caller && caller != "local":
		// The token's name is who holds: a caller names what it likes
		// beside it, never instead of it.
		owner += " [token " + caller + "]"
	}
	var who []string
	switch {
	case host != "" || pid != 0:
		if host != "" {
			who = append(who, "host "+host)
		}
		if pid != 0 {
			who = append(who, fmt.Sprintf("pid %d", pid))
		}
	default:
		if p, ok := r.Context().Value(peerKey{}).(Peer); ok {
			who = append(who, fmt.Sprintf("pid %d uid %d", p.PID, p.UID))
		} else if r.RemoteAddr != "" && r.RemoteAddr != "@" {
			who = append(who, "from "+r.RemoteAddr)
		}
	}
	if len(who) == 0 {
		return owner
	}
	return owner + " (" + strings.Join(who, " ") + ")"
}
