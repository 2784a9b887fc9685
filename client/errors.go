package client

import (
	"errors"
	"fmt"

	"github.com/wardenlock/warden/wire"
)

// The service's typed errors, re-exported so callers need not import wire.
// Every error the client returns for a server answer is a *wire.Error that
// matches the sentinel of its code with errors.Is; use errors.As to read the
// detail text.
var (
	ErrNotLeader       = wire.ErrNotLeader
	ErrWrongShard      = wire.ErrWrongShard
	ErrConflict        = wire.ErrConflict // TryLock: the lock is held in a conflicting mode
	ErrNotHolder       = wire.ErrNotHolder
	ErrStaleToken      = wire.ErrStaleToken
	ErrSessionExpired  = wire.ErrSessionExpired // the session's lease is gone (also returned locally once a session is Lost)
	ErrInvalidArgument = wire.ErrInvalidArgument
	ErrTooLarge        = wire.ErrTooLarge
	ErrUnavailable     = wire.ErrUnavailable
	ErrTimeout         = wire.ErrTimeout // the server-side wait ran out; nothing is held
	ErrUnknownOp       = wire.ErrUnknownOp
	ErrMalformed       = wire.ErrMalformed
	ErrNotFound        = wire.ErrNotFound
	ErrVersionMismatch = wire.ErrVersionMismatch // CAS failed
	ErrCancelled       = wire.ErrCancelled
	ErrCompacted       = wire.ErrCompacted // a watch start revision is no longer retained
	ErrRangeMoving     = wire.ErrRangeMoving
	ErrAmbiguous       = wire.ErrAmbiguous // the operation may or may not have taken effect
	ErrSpansRanges     = wire.ErrSpansRanges
	ErrSelfConflict    = wire.ErrSelfConflict
	ErrUpgradeConflict = wire.ErrUpgradeConflict
	ErrTooMany         = wire.ErrTooMany
	ErrUnauthorized    = wire.ErrUnauthorized
	ErrInternal        = wire.ErrInternal
	ErrClosed          = wire.ErrClosed
	ErrDeadlock        = wire.ErrDeadlock    // waiting would close a wait-for cycle: release something and retry
	ErrLockDelayed     = wire.ErrLockDelayed // try-acquire during the path's lock-delay
	ErrSeqReused       = wire.ErrSeqReused   // a request sent with Do reused a Seq of another request
)

// Errors that originate in the client itself.
var (
	// ErrClientClosed is returned by every call after Client.Close.
	ErrClientClosed = errors.New("client: closed")
	// ErrConnLost means the connection carrying a request broke before the
	// answer arrived. The client retries such requests itself when that is
	// safe; callers see it only wrapped in ErrAmbiguous or when no retry was
	// possible.
	ErrConnLost = errors.New("client: connection lost")
	// ErrNoEndpoint means no endpoint could be reached.
	ErrNoEndpoint = errors.New("client: no endpoint reachable")
)

// IsRetryable reports whether err is a transient routing or availability
// failure after which the same request may be sent again unchanged. Decisions
// (Conflict, NotHolder, ...) and ambiguous outcomes are not retryable.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrAmbiguous) {
		return false
	}
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Code.Retryable()
	}
	return errors.Is(err, ErrConnLost) || errors.Is(err, ErrNoEndpoint)
}

// ambiguous wraps cause so that it matches both ErrAmbiguous and cause.
func ambiguous(op wire.Op, cause error) error {
	return fmt.Errorf("%w: %s may have been applied: %w", ErrAmbiguous, op, cause)
}

// notHeld is returned by Unlock, Release, Proclaim and Resign when the caller
// does not hold what it tries to give up.
func notHeld(what string) error {
	return wire.Errorf(wire.NotHolder, "%s is not held by this client", what)
}
