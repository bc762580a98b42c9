package zkserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// errNotWhitelisted marks a server that refuses a four-letter command.
var errNotWhitelisted = errors.New("four-letter command not whitelisted")

// errNotServing marks a server that is up but not serving (no quorum yet).
var errNotServing = errors.New("server is not currently serving requests")

// FourLetter sends a four-letter command (ruok, srvr, mntr, ...) to addr and
// returns the raw reply. Without a deadline in ctx it gives up after 5s.
func FourLetter(ctx context.Context, addr, cmd string) (string, error) {
	return fourLetter(ctx, addr, cmd, nil)
}

// FourLetterTLS is FourLetter over TLS, for a TLS-only client port.
func FourLetterTLS(ctx context.Context, addr, cmd string, cfg *tls.Config) (string, error) {
	return fourLetter(ctx, addr, cmd, cfg)
}

func fourLetter(ctx context.Context, addr, cmd string, cfg *tls.Config) (string, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	var conn net.Conn
	var err error
	if cfg != nil {
		d := tls.Dialer{Config: cfg}
		conn, err = d.DialContext(ctx, "tcp", addr)
	} else {
		var d net.Dialer
		conn, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return "", err
	}
	defer conn.Close()
	dl, _ := ctx.Deadline()
	_ = conn.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := io.WriteString(conn, cmd); err != nil {
		return "", fmt.Errorf("zktest: %s to %s: %w", cmd, addr, err)
	}
	// Read to EOF, except that a server still starting up answers "not
	// currently serving" and then (ZooKeeper 3.8 bug: NPE closing the
	// command socket) may never close the connection.
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := conn.Read(buf)
		sb.Write(buf[:n])
		if strings.Contains(sb.String(), "not currently serving requests") {
			break
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", fmt.Errorf("zktest: %s to %s: %w", cmd, addr, err)
		}
	}
	out := sb.String()
	if strings.Contains(out, "not in the whitelist") {
		return out, fmt.Errorf("zktest: %s to %s: %w: %s", cmd, addr, errNotWhitelisted, strings.TrimSpace(out))
	}
	if strings.Contains(out, "not currently serving requests") {
		return out, fmt.Errorf("zktest: %s to %s: %w", cmd, addr, errNotServing)
	}
	return out, nil
}

// ServerMode asks addr for its mode via `srvr` (whitelisted by default, unlike
// mntr): "standalone", "leader", "follower", "observer". A server that is up
// but not in a quorum yields an error.
func ServerMode(ctx context.Context, addr string) (string, error) {
	return serverModeWith(ctx, addr, nil)
}

func serverModeWith(ctx context.Context, addr string, cfg *tls.Config) (string, error) {
	out, err := fourLetter(ctx, addr, "srvr", cfg)
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(out, "\n") {
		if mode, ok := strings.CutPrefix(strings.TrimSpace(l), "Mode:"); ok {
			return strings.TrimSpace(mode), nil
		}
	}
	return "", fmt.Errorf("zktest: no Mode in srvr reply from %s: %q", addr, out)
}
