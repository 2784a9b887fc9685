"""Revocation requests: the service asking a holder to give its lock back.

A lock taken with ``revocable=True`` can be asked back by a waiter, and any
lock by an admin (``client.revoke_lock``, ``warden locks revoke``). The
holder is told with a ``revoke-requested`` event on the path (docs/protocol.md
§3.3, §4.9) and has the grace the request gave to release; at the deadline
the service revokes the hold (the holder then sees ``HoldLost(forced)``).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from . import wire
from .wire import Cause, Kind


@dataclass(frozen=True)
class RevokeRequest:
    """The service wants the hold with ``token`` on ``path`` back by
    ``deadline`` (Unix seconds); ``by_admin`` says an admin asked (else a
    waiter, on a revocable lock)."""

    path: str
    token: int
    deadline: float
    by_admin: bool = False


class RevokeRequests:
    """An iterator of :class:`RevokeRequest` for the hold with ``token`` on
    ``path`` (token 0: any holder's).

    A request already pending when it starts comes first; then each new one
    as the service makes it (a request may come more than once: a second
    request can only bring the deadline forward). The iteration ends when
    that hold is released (token given) or :meth:`close` is called (from any
    thread, or by leaving a ``with`` block).
    """

    def __init__(self, client, path: str, token: int = 0):
        from .watch import Watch

        self.path, self.token = path, token
        self._pending: list[RevokeRequest] = []
        self._ended = False
        # The pending state first, then events from just after it: nothing
        # falls between the two.
        info = client.lock_info(path)
        if info.revoke_at and (token == 0 or any(h.token == token for h in info.holders)):
            self._pending.append(RevokeRequest(path, token, info.revoke_at / 1000))
        self._watch = Watch(client, path, start_revision=info.rev + 1 if info.rev else 0)

    def _take(self, ev: wire.Event) -> RevokeRequest | None:
        if ev.path != self.path or (self.token and ev.token != self.token):
            return None
        if ev.kind == Kind.REVOKE_REQUESTED:
            return RevokeRequest(self.path, ev.token, (ev.time + ev.ttl) / 1000, ev.cause == Cause.ADMIN)
        if ev.kind == Kind.RELEASED and self.token:
            self.close()  # the hold is over
        return None

    def get(self, timeout: float | None = None) -> RevokeRequest | None:
        """The next request, or None when timeout (seconds) passes first or
        the iteration has ended."""
        if self._pending:
            return self._pending.pop(0)
        end = None if timeout is None else time.monotonic() + timeout
        while not self._ended:
            ev = self._watch.get(None if end is None else max(end - time.monotonic(), 0))
            if ev is None:
                return None
            r = self._take(ev)
            if r is not None:
                return r
        return None

    def __iter__(self):
        return self

    def __next__(self) -> RevokeRequest:
        r = self.get()  # without a timeout, None only once it has ended
        if r is None:
            raise StopIteration
        return r

    @property
    def ended(self) -> bool:
        """True once the hold was released or :meth:`close` was called."""
        return self._ended

    def close(self) -> None:
        """Ends the iteration (and its watch)."""
        self._ended = True
        self._watch.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def call_on_requests(requests: RevokeRequests, done: threading.Event, fn) -> None:
    """Calls fn(RevokeRequest) for each request until the hold ends (done
    set, or the iteration ends); runs on a thread of its own."""
    try:
        while not done.is_set():
            r = requests.get(timeout=0.5)
            if r is not None:
                try:
                    fn(r)
                except Exception:
                    logging.getLogger("warden").exception("warden: revoke-request callback")
            elif requests.ended:
                return
    finally:
        requests.close()
