"""Typed errors: one class per result code of the service, under WardenError.

Catch a class (``except warden.Conflict``) or test ``err.code``;
:func:`is_retryable` says whether the same request may simply be sent again.
"""

from __future__ import annotations

from .wire import CAUSE_NAMES, CODE_NAMES, Code


class WardenError(Exception):
    """An error from Warden: a result code, a message and, from the service, its answer."""

    code: int = -1

    def __init__(self, msg: str = "", *, code: int | None = None, response=None):
        if code is not None:
            self.code = code
        self.msg = msg
        self.response = response
        name = CODE_NAMES.get(self.code, f"code {self.code}")
        super().__init__(f"warden: {name}: {msg}" if msg else f"warden: {name}")


_BY_CODE: dict[int, type[WardenError]] = {}


def _coded(code: int, *bases: type):
    def wrap(cls):
        cls.code = code
        _BY_CODE[code] = cls
        return cls
    return wrap


@_coded(Code.NOT_LEADER)
class NotLeader(WardenError):
    """The replica does not lead the shard (retried by the client)."""


@_coded(Code.WRONG_SHARD)
class WrongShard(WardenError):
    """The shard does not own the key (retried by the client)."""


@_coded(Code.CONFLICT)
class Conflict(WardenError):
    """Held in a conflicting mode (a try)."""


@_coded(Code.NOT_HOLDER)
class NotHolder(WardenError):
    """Release, renew, proclaim or resign by a non-holder."""


class HoldLost(NotHolder):
    """A hold ended without its holder's doing.

    ``cause`` is the :class:`warden.Cause` the service gave: ``FORCED`` (revoked
    at its revocation deadline), ``RELEASED``, ``RESIGNED`` or ``HANDOVER``
    (another client ended it: an operator's release, resign or hand-over),
    ``EXPIRED`` or ``REVOKED`` (the session's lease ended, ``session_ended``
    True; also when the session's local deadline passed first). ``cause`` is
    ``NONE`` when the service answered a release of the hold with
    ``NotHolder`` or ``StaleToken`` before its notice arrived. A subclass of
    :class:`NotHolder`: the holder is not the holder any more.
    """

    def __init__(self, path: str, token: int, cause: int, *, session_ended: bool = False, client: int = 0,
                 detail: str = "", response=None):
        self.path, self.token, self.cause = path, token, cause
        self.session_ended = session_ended
        self.client = client  # the request that ended it (another client's), when the service shows it
        why = CAUSE_NAMES.get(cause, str(cause)) if cause else "not held any more"
        msg = f"{path} (token {token}) lost: {why}" + (f": {detail}" if detail else "")
        super().__init__(msg, response=response)
        self.args = (f"warden: hold lost: {msg}",)

    @property
    def cause_name(self) -> str:
        return CAUSE_NAMES.get(self.cause, str(self.cause))


@_coded(Code.STALE_TOKEN)
class StaleToken(WardenError):
    """The token is not the current holder's."""


@_coded(Code.SESSION_EXPIRED)
class SessionExpired(WardenError):
    """The lease expired, was revoked, or the session is lost or closed."""


@_coded(Code.INVALID_ARGUMENT)
class InvalidArgument(WardenError, ValueError):
    """Bad path, TTL out of range, bad mode, ..."""


@_coded(Code.TOO_LARGE)
class TooLarge(WardenError, ValueError):
    """A value or frame over its limit."""


@_coded(Code.UNAVAILABLE)
class Unavailable(WardenError, ConnectionError):
    """No quorum, shard not ready, or no endpoint reachable: nothing was decided."""


@_coded(Code.TIMEOUT)
class Timeout(WardenError, TimeoutError):
    """The wait ran out (nothing taken), or a read had no answer in time."""


@_coded(Code.UNKNOWN_OP)
class UnknownOp(WardenError):
    """The op is not known to the service."""


@_coded(Code.MALFORMED)
class Malformed(WardenError):
    """A frame could not be decoded."""


@_coded(Code.NOT_FOUND)
class NotFound(WardenError, LookupError):
    """Key, lock, election, waiter or session unknown."""


@_coded(Code.VERSION_MISMATCH)
class VersionMismatch(WardenError):
    """A compare-and-set found another version."""


@_coded(Code.QUEUED)
class Queued(WardenError):
    """An interim notice; never raised by the client."""


@_coded(Code.CANCELLED)
class Cancelled(WardenError):
    """The waiter was withdrawn, or a retried grant has since ended."""


@_coded(Code.COMPACTED)
class Compacted(WardenError):
    """A watch's start revision is no longer retained."""


@_coded(Code.RANGE_MOVING)
class RangeMoving(WardenError):
    """The range is frozen for a move (retried by the client)."""


@_coded(Code.AMBIGUOUS)
class Ambiguous(WardenError):
    """The request may or may not have taken effect."""


@_coded(Code.SPANS_RANGES)
class SpansRanges(WardenError):
    """The path's subtree spans several ranges."""


@_coded(Code.SELF_CONFLICT)
class SelfConflict(WardenError):
    """The owner already holds a conflicting lock on an ancestor or descendant."""


@_coded(Code.UPGRADE_CONFLICT)
class UpgradeConflict(WardenError):
    """A shared to exclusive upgrade while others hold the lock."""


@_coded(Code.TOO_MANY)
class TooMany(WardenError):
    """A limit: waiters, locks per lease, watches, connections or request rate."""

    @property
    def retry_after(self) -> float | None:
        """Seconds the service suggests waiting before a retry, when it gave a hint."""
        ttl = self.response.ttl if self.response is not None else 0
        return ttl / 1000 if ttl > 0 else None


@_coded(Code.UNAUTHORIZED)
class Unauthorized(WardenError, PermissionError):
    """Bad or missing credentials, or a permission the identity lacks."""


@_coded(Code.INTERNAL)
class Internal(WardenError):
    """A server bug (reported; the node keeps serving)."""


@_coded(Code.CLOSED)
class Closed(WardenError):
    """The server, the connection or this client is shutting down."""


@_coded(Code.DEADLOCK)
class Deadlock(WardenError):
    """Queueing would close a wait-for cycle in the shard; nothing queued."""


@_coded(Code.LOCK_DELAYED)
class LockDelayed(WardenError):
    """The path is in lock-delay after a non-graceful end."""


@_coded(Code.RESTORE_REFUSED)
class RestoreRefused(WardenError):
    """A restore entry reached a shard that holds state (never sent to clients)."""


@_coded(Code.SUPERSEDED)
class Superseded(WardenError):
    """A newer copy of a waiting request took its place (re-sent by the client)."""


@_coded(Code.SEQ_REUSED)
class SeqReused(WardenError):
    """The request's (client, seq) already answered a different request: nothing applied."""


RETRYABLE = frozenset({Code.NOT_LEADER, Code.WRONG_SHARD, Code.UNAVAILABLE, Code.RANGE_MOVING, Code.CLOSED})


def is_retryable(err: BaseException) -> bool:
    """Whether err is a routing or availability failure, never a decision:
    the same request (same sequence number) may be sent again."""
    return isinstance(err, WardenError) and err.code in RETRYABLE


def error_for(code: int, msg: str = "", response=None) -> WardenError:
    """The typed error of a result code (WardenError itself for an unknown code)."""
    cls = _BY_CODE.get(code)
    if cls is None:
        return WardenError(msg, code=code, response=response)
    return cls(msg, response=response)
