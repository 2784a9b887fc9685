package wire

import (
	"errors"
	"fmt"
)

// Code is a typed result code. Values are part of the protocol: append only.
type Code uint16

const (
	OK              Code = 0
	NotLeader       Code = 1  // this replica is not the shard leader; Hint names the leader
	WrongShard      Code = 2  // the shard does not own the key; Hint has the owner and generation
	Conflict        Code = 3  // the lock is held in a conflicting mode (try-acquire)
	NotHolder       Code = 4  // release/renew/proclaim by someone who does not hold it
	StaleToken      Code = 5  // the token is not the current holder's
	SessionExpired  Code = 6  // the lease has expired or was revoked
	InvalidArgument Code = 7  // bad path, TTL out of range, bad mode, ...
	TooLarge        Code = 8  // value or frame over its limit
	Unavailable     Code = 9  // no quorum / shard not ready: safe to retry
	Timeout         Code = 10 // the wait ran out (the request did not take effect)
	UnknownOp       Code = 11
	Malformed       Code = 12 // frame could not be decoded
	NotFound        Code = 13 // key, lock, election or session does not exist
	VersionMismatch Code = 14 // compare-and-set failed
	Queued          Code = 15 // not an error: the acquire is waiting; a grant is pushed later
	Cancelled       Code = 16 // the waiter was withdrawn
	Compacted       Code = 17 // watch start revision is older than the retained history
	RangeMoving     Code = 18 // the range is frozen for a move: retry shortly
	Ambiguous       Code = 19 // the operation may or may not have taken effect
	SpansRanges     Code = 20 // the path's subtree is split over several ranges
	SelfConflict    Code = 21 // the owner already holds a conflicting lock on an ancestor/descendant
	UpgradeConflict Code = 22 // shared->exclusive upgrade while others hold the lock
	TooMany         Code = 23 // a per-session / per-lock / per-connection limit was reached
	Unauthorized    Code = 24
	Internal        Code = 25
	Closed          Code = 26 // the server or connection is shutting down

	Deadlock    Code = 30 // waiting would close a cycle in the shard's wait-for graph; the request did not queue
	LockDelayed Code = 31 // the path is in lock-delay after a non-graceful end (try-acquire); Msg says until when
)

var codeNames = map[Code]string{
	OK: "ok", NotLeader: "not leader", WrongShard: "wrong shard", Conflict: "conflict",
	NotHolder: "not holder", StaleToken: "stale token", SessionExpired: "session expired",
	InvalidArgument: "invalid argument", TooLarge: "too large", Unavailable: "unavailable",
	Timeout: "timeout", UnknownOp: "unknown op", Malformed: "malformed frame",
	NotFound: "not found", VersionMismatch: "version mismatch", Queued: "queued",
	Cancelled: "cancelled", Compacted: "compacted", RangeMoving: "range moving",
	Ambiguous: "ambiguous", SpansRanges: "spans ranges", SelfConflict: "self conflict",
	UpgradeConflict: "upgrade conflict", TooMany: "too many", Unauthorized: "unauthorized",
	Internal: "internal", Closed: "closed", Deadlock: "deadlock", LockDelayed: "lock delayed",
}

func (c Code) String() string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return fmt.Sprintf("code(%d)", uint16(c))
}

// Retryable reports whether a request that failed with c may be sent again
// unchanged: routing and availability errors, never a decision.
func (c Code) Retryable() bool {
	switch c {
	case NotLeader, WrongShard, Unavailable, RangeMoving, Closed:
		return true
	}
	return false
}

// Error is a typed protocol error. Compare with errors.Is against the
// sentinels below (which match on Code alone) or errors.As to read Detail.
type Error struct {
	Code   Code
	Detail string
}

func (e *Error) Error() string {
	if e.Detail == "" {
		return "warden: " + e.Code.String()
	}
	return "warden: " + e.Code.String() + ": " + e.Detail
}

// Is matches any *Error with the same code.
func (e *Error) Is(target error) bool {
	var t *Error
	if errors.As(target, &t) {
		return t.Code == e.Code
	}
	return false
}

// Errorf builds a typed error.
func Errorf(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Detail: fmt.Sprintf(format, args...)}
}

// Sentinels for errors.Is.
var (
	ErrNotLeader       = &Error{Code: NotLeader}
	ErrWrongShard      = &Error{Code: WrongShard}
	ErrConflict        = &Error{Code: Conflict}
	ErrNotHolder       = &Error{Code: NotHolder}
	ErrStaleToken      = &Error{Code: StaleToken}
	ErrSessionExpired  = &Error{Code: SessionExpired}
	ErrInvalidArgument = &Error{Code: InvalidArgument}
	ErrTooLarge        = &Error{Code: TooLarge}
	ErrUnavailable     = &Error{Code: Unavailable}
	ErrTimeout         = &Error{Code: Timeout}
	ErrUnknownOp       = &Error{Code: UnknownOp}
	ErrMalformed       = &Error{Code: Malformed}
	ErrNotFound        = &Error{Code: NotFound}
	ErrVersionMismatch = &Error{Code: VersionMismatch}
	ErrCancelled       = &Error{Code: Cancelled}
	ErrCompacted       = &Error{Code: Compacted}
	ErrRangeMoving     = &Error{Code: RangeMoving}
	ErrAmbiguous       = &Error{Code: Ambiguous}
	ErrSpansRanges     = &Error{Code: SpansRanges}
	ErrSelfConflict    = &Error{Code: SelfConflict}
	ErrUpgradeConflict = &Error{Code: UpgradeConflict}
	ErrTooMany         = &Error{Code: TooMany}
	ErrUnauthorized    = &Error{Code: Unauthorized}
	ErrInternal        = &Error{Code: Internal}
	ErrClosed          = &Error{Code: Closed}
	ErrDeadlock        = &Error{Code: Deadlock}
	ErrLockDelayed     = &Error{Code: LockDelayed}
)

// AsError returns the response's error, or nil when Code is OK or Queued.
func (r *Response) AsError() error {
	if r.Code == OK || r.Code == Queued {
		return nil
	}
	if r.Code == Compacted && len(r.Position) == 1 {
		return &CompactedError{Shard: r.Position[0].Shard, Oldest: r.Position[0].Rev, Detail: r.Msg}
	}
	return &Error{Code: r.Code, Detail: r.Msg}
}

// CompactedError is a Compacted refusal of one shard's history: a watch
// asked for revisions of Shard older than Oldest, the oldest its replica
// still retains. It matches ErrCompacted.
type CompactedError struct {
	Shard  uint64 // 0: the shard serving the request (not named)
	Oldest uint64
	Detail string
}

func (e *CompactedError) Error() string {
	return fmt.Sprintf("warden: compacted: shard %d keeps revisions from %d on: %s", e.Shard, e.Oldest, e.Detail)
}

// Unwrap gives the plain typed error, for errors.Is and errors.As.
func (e *CompactedError) Unwrap() error { return &Error{Code: Compacted, Detail: e.Detail} }

// Response answers e's refusal, naming the shard and its oldest revision.
func (e *CompactedError) Response(id uint64) *Response {
	return &Response{ID: id, Code: Compacted, Msg: e.Detail, Position: []ShardRev{{Shard: e.Shard, Rev: e.Oldest}}}
}
