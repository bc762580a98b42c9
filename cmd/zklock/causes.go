package main

import (
	"errors"
	"strings"

	"github.com/zklock/zklock"
)

// How zklock reads the library's errors. Exit codes and messages are chosen
// by the cause an error wraps, told apart with errors.Is against the
// library's sentinels (zklock.ErrLocked, zklock.ErrLockLost, ...) and
// context's and ZooKeeper's errors, never by the error's wording: the wording
// is only shown, inside our own "zklock: ..." messages.

// libPrefix begins every error of the library, as it begins our messages.
const libPrefix = "zklock: "

// cause renders a library error for one of our messages, without the prefix
// the message has already.
func cause(err error) string {
	var op *zklock.OpError
	if errors.As(err, &op) {
		err = op.Err // our messages name the call and the path already
	}
	return cliWords(strings.TrimPrefix(err.Error(), libPrefix))
}

// lossCause renders why a lease ended. For a loss, which the library words
// "<zklock.ErrLockLost>: <why>", that is the why alone ("node ... was deleted
// by someone else"): our messages say that the lock was lost already.
func lossCause(err error) string {
	if errors.Is(err, zklock.ErrLockLost) {
		if why, ok := strings.CutPrefix(err.Error(), zklock.ErrLockLost.Error()+": "); ok {
			return why
		}
	}
	return cause(err)
}

// badPath checks a lock path without any I/O: it returns the usage message
// for an invalid one (zklock.ErrInvalidPath), or "".
func badPath(p string) string {
	err := zklock.ValidatePath(p)
	if err == nil {
		return ""
	}
	return cause(err) + " (lock paths look like /locks/backup)"
}
