"""Warden's Python client: locks with fencing tokens, sessions, elections,
watches and a small KV store, over Warden's msgpack protocol
(docs/protocol.md of the Warden repository).

    import warden

    with warden.Client(["127.0.0.1:7070", "127.0.0.1:7071"]) as c, c.session(ttl=10) as s:
        with s.lock("/locks/billing/nightly") as lock:
            run_billing(fence=lock.token)
"""

from .client import KV, Client, Leader, LockInfo, tls_context
from .election import Election, Observer, observe
from .errors import (Ambiguous, Cancelled, Closed, HoldLost, Compacted, Conflict, Deadlock, InvalidArgument, Internal,
                     LockDelayed, Malformed, NotFound, NotHolder, NotLeader, Queued, RangeMoving, RestoreRefused,
                     SelfConflict, SeqReused, SessionExpired, SpansRanges, StaleToken, Superseded, Timeout, TooLarge,
                     TooMany, Unauthorized, Unavailable, UnknownOp, UpgradeConflict, VersionMismatch, WardenError,
                     WrongShard, error_for, is_retryable)
from .locks import Lock, LockLease, MultiLock, Permit, Semaphore
from .revoke import RevokeRequest, RevokeRequests
from .session import CLOSED, CONNECTED, LOST, SUSPENDED, Session
from .watch import Event, Watch
from .wire import Cause, Kind

from . import aio  # noqa: E402  (warden.aio: the asyncio client, a facade over the above)

__version__ = "0.1.0"

__all__ = [
    "Client", "Session", "Lock", "LockLease", "Semaphore", "Permit", "MultiLock", "Election", "Observer",
    "Watch", "Event", "RevokeRequest", "RevokeRequests", "KV", "Leader", "LockInfo", "Kind", "Cause", "tls_context", "observe",
    "CONNECTED", "SUSPENDED", "LOST", "CLOSED",
    "WardenError", "is_retryable", "error_for",
    "NotLeader", "WrongShard", "Conflict", "NotHolder", "StaleToken", "SessionExpired", "InvalidArgument",
    "TooLarge", "Unavailable", "Timeout", "UnknownOp", "Malformed", "NotFound", "VersionMismatch", "Queued",
    "Cancelled", "Compacted", "RangeMoving", "Ambiguous", "SpansRanges", "SelfConflict", "UpgradeConflict",
    "TooMany", "Unauthorized", "Internal", "Closed", "Deadlock", "LockDelayed", "RestoreRefused", "Superseded",
    "SeqReused", "HoldLost", "aio",
]
