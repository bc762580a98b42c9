package lockservice

// How a failed acquire, and a loss, are said to the caller.

import (
	"errors"
	"net/http"

	"github.com/go-zookeeper/zk"

	"github.com/zklock/zklock"
)

// lostAtGrant says why a lock lost as it was granted is not held.
func lostAtGrant(err error) string {
	return "the lock was lost as it was granted (" + reason(err) + "): it is not held; try again"
}

// reason is a loss as the stream says it.
func reason(err error) string {
	switch {
	case errors.Is(err, zk.ErrSessionExpired):
		return "session expired: " + err.Error()
	case errors.Is(err, zklock.ErrClosed):
		return "the service's ZooKeeper client closed"
	}
	return err.Error()
}

// acquireFailed answers a failed acquire; timedOut: the request's timeout
// passed.
func (s *Service) acquireFailed(w http.ResponseWriter, err error, timedOut bool) {
	status, code, msg := s.failure(err, timedOut)
	writeError(w, status, code, msg)
}

// failure is how a failed acquire is answered: the status, the code and the
// message.
func (s *Service) failure(err error, timedOut bool) (int, string, string) {
	switch {
	case errors.Is(err, zklock.ErrUnreachable):
		return http.StatusServiceUnavailable, "unreachable", err.Error()
	case errors.Is(err, zklock.ErrLocked):
		return http.StatusConflict, "locked", err.Error()
	case timedOut:
		return http.StatusRequestTimeout, "timeout", "timeout passed while others held the lock: " + err.Error()
	case errors.Is(err, zklock.ErrIncompatible), errors.Is(err, zklock.ErrLimitMismatch):
		return http.StatusConflict, "incompatible", err.Error()
	case errors.Is(err, zklock.ErrNestedPath):
		return http.StatusConflict, "nested_path", err.Error()
	case errors.Is(err, zk.ErrNoAuth):
		return http.StatusForbidden, "zookeeper_refused", err.Error()
	case s.ctx.Err() != nil:
		return http.StatusServiceUnavailable, "closing", "the service is stopping"
	}
	return http.StatusInternalServerError, "failed", err.Error()
}
