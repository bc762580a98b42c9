package wire

// This file is Connect's TLS (WithTLS): the handshake happens inside the
// dial, under a deadline, so the Tap and go-zookeeper above it see plaintext
// frames, and a failure is named in Connect's error.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"
)

// minHandshakeTimeout bounds a TLS handshake from below: go-zookeeper's
// dial timeout (a second) is short for a first handshake with a busy JVM. A
// silent server costs at most this per dial; Connect's bound holds anyway,
// as closing the client cancels a handshake under way.
const minHandshakeTimeout = 5 * time.Second

// handshake runs the TLS client handshake on nc, within the dial's
// timeout (at least minHandshakeTimeout) and until the Tap shuts down.
func (w *Tap) handshake(nc net.Conn, address string, timeout time.Duration) (net.Conn, error) {
	cfg := w.tls.Clone()
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(address); err == nil {
			cfg.ServerName = host
		}
	}
	tc := tls.Client(nc, cfg)
	w.mu.Lock()
	w.handshaking = address
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.handshaking = ""
		w.mu.Unlock()
	}()
	limit := max(timeout, minHandshakeTimeout)
	ctx, cancel := context.WithTimeout(w.ctx, limit)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
			return nil, fmt.Errorf("TLS handshake with %s: no answer within %v (is it a TLS port?): %w", address, limit, err)
		}
		return nil, tlsCause(fmt.Sprintf("TLS handshake with %s", address), cfg.ServerName, err)
	}
	return tc, nil
}

// tlsCause names why a TLS connection failed, in words a user acts on.
func tlsCause(what, name string, err error) error {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		record   tls.RecordHeaderError
		alert    tls.AlertError
	)
	switch {
	case errors.As(err, &unknown):
		return fmt.Errorf("%s: the server's certificate is not trusted (signed by an authority not in the TLS config's RootCAs): %w", what, err)
	case errors.As(err, &hostname):
		return fmt.Errorf("%s: name mismatch: the server's certificate is not valid for %q: %w", what, name, err)
	case errors.As(err, &invalid):
		return fmt.Errorf("%s: the server's certificate is not valid: %w", what, err)
	case errors.As(err, &record):
		return fmt.Errorf("%s: the server does not speak TLS (a plain client port? drop WithTLS): %w", what, err)
	case errors.As(err, &alert), isRemoteAlert(err):
		return fmt.Errorf("%s: the server refused the handshake (does it require a client certificate, or not trust ours?): %w", what, err)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		return fmt.Errorf("%s: the server closed the connection during the handshake (a plain client port? it refuses TLS): %w", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// isRemoteAlert reports a TLS alert the server sent (crypto/tls reports it
// as a net.OpError "remote error").
func isRemoteAlert(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error"
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// closedBeforeAnswer is the cause of a connection that ended before the
// server's first reply. Over TLS that is where a refused client certificate
// shows (TLS 1.3 reports it after the client's side of the handshake); a
// plain client on a TLS port is closed there too.
func (w *Tap) closedBeforeAnswer(err error) error {
	if w.tls != nil {
		if isRemoteAlert(err) {
			return tlsCause("TLS", "", err)
		}
		return fmt.Errorf("the server closed the connection before answering: %w", err)
	}
	return fmt.Errorf("the server closed the connection before answering (if the port is TLS: see WithTLS): %w", err)
}

// isTLSRecord reports bytes that start a TLS record (an alert or a
// handshake, any TLS version): what a TLS port answers a plain client with.
func isTLSRecord(b []byte) bool {
	return len(b) >= 3 && (b[0] == 0x15 || b[0] == 0x16) && b[1] == 3 && b[2] <= 4
}
