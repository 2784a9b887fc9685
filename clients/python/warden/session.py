"""Sessions: a lease the client keeps alive, owning locks, candidacies and keys.

The client picks the lease id itself, derived from a random secret key
(docs/protocol.md §7), and a background thread sends a keepalive every
TTL/3. The client counts the lease from the moment it *sent* the last
keepalive the service acknowledged, on the monotonic clock; the service
counts from when it received it, which is later. So the session is lost
here first: once :attr:`Session.alive` is False, the service may still hold
the session's locks for a short while, but never the other way round.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from typing import Callable

from . import wire
from .client import BACKOFF_CAP, Client, backoff
from .errors import SessionExpired, WardenError
from .wire import Code, Op

log = logging.getLogger("warden")

CONNECTED = "connected"  # the last keepalive was acknowledged
SUSPENDED = "suspended"  # a keepalive failed or is overdue; the lease may still be alive
LOST = "lost"  # the service reported the lease gone, or the local deadline passed
CLOSED = "closed"  # closed by its owner


def new_lease_key() -> tuple[int, int]:
    """A random lease key from a cryptographic source and the lease id it proves."""
    while True:
        key = secrets.randbits(64)
        lease = wire.lease_id(key)
        if lease:
            return key, lease


class Session:
    """A lease kept alive in the background; see :meth:`Client.session`.

    ``done`` is an Event set when the session is lost or closed;
    ``alive`` compares the clock with the local deadline, so it turns False
    the moment the deadline passes even if the keepalive thread has not run.
    """

    def __init__(self, client: Client, ttl: float = 10.0):
        if ttl <= 0:
            raise ValueError("warden: session ttl must be positive")
        self.client = client
        self.ttl = ttl
        self.ttl_ms = int(ttl * 1000)
        self._key, self.lease = new_lease_key()
        self._cond = threading.Condition()
        self._state = CONNECTED
        self.cause = ""
        self.done = threading.Event()
        self._holds: set = set()
        self._watchers: list[Callable[[str], None]] = []
        sent = time.monotonic()
        self._keepalive_once(sent, deadline=sent + client.timeout)  # checks connectivity
        self._deadline = sent + ttl
        self._thread = threading.Thread(target=self._run, name=f"warden-session-{self.lease:x}", daemon=True)
        self._thread.start()

    # --- state ------------------------------------------------------------------

    @property
    def state(self) -> str:
        with self._cond:
            if self._state in (CONNECTED, SUSPENDED) and time.monotonic() >= self._deadline:
                return LOST
            return self._state

    @property
    def alive(self) -> bool:
        """True while the lease is alive as far as this client can prove."""
        with self._cond:
            return self._state in (CONNECTED, SUSPENDED) and time.monotonic() < self._deadline

    @property
    def deadline(self) -> float:
        """The local deadline on the time.monotonic() clock."""
        with self._cond:
            return self._deadline

    def on_state(self, fn: Callable[[str], None]) -> None:
        """Calls fn(state) from the keepalive thread on every state change."""
        self._watchers.append(fn)

    def check(self) -> None:
        """Raises SessionExpired when the session is lost or closed."""
        if not self.alive:
            raise SessionExpired(f"session {self.lease:x} is {self.state}" + (f": {self.cause}" if self.cause else ""))

    # --- keepalive ----------------------------------------------------------------

    def _keepalive_once(self, sent: float, deadline: float):
        req = wire.Request(op=Op.KEEPALIVE, lease=self.lease, ttl=self.ttl_ms)
        try:
            resp = self.client._call(req, deadline=deadline)
        except WardenError as e:
            if e.response is not None and self.lease in e.response.leases:
                raise SessionExpired("the service lists the lease as gone", response=e.response) from None
            raise
        if self.lease in resp.leases:
            raise SessionExpired("the service lists the lease as gone", response=resp)
        return resp

    def _run(self) -> None:
        interval = self.ttl / 3
        next_at = time.monotonic() + interval
        failures = 0
        while True:
            with self._cond:
                while self._state not in (LOST, CLOSED):
                    now = time.monotonic()
                    if now >= self._deadline or now >= next_at:
                        break
                    self._cond.wait(min(next_at, self._deadline) - now)
                if self._state in (LOST, CLOSED):
                    return
                deadline = self._deadline
            if time.monotonic() >= deadline:
                self._end(LOST, "no keepalive acknowledged within the TTL (local deadline)")
                return
            sent = time.monotonic()
            try:
                self._keepalive_once(sent, deadline=min(deadline, sent + interval))
            except SessionExpired as e:
                self._end(LOST, str(e.msg))
                return
            except WardenError as e:
                if self.client.closed:
                    self._end(CLOSED, "client closed")
                    return
                failures += 1
                self._set(SUSPENDED, str(e))
                next_at = time.monotonic() + min(backoff(failures), interval, BACKOFF_CAP)
                continue
            failures = 0
            with self._cond:
                if self._state in (LOST, CLOSED):
                    return
                self._deadline = max(self._deadline, sent + self.ttl)
            self._set(CONNECTED, "")
            next_at = sent + interval

    def _set(self, state: str, cause: str) -> None:
        with self._cond:
            if self._state == state or self._state in (LOST, CLOSED):
                return
            self._state = state
            self.cause = cause
        for fn in list(self._watchers):
            fn(state)

    def _end(self, state: str, cause: str) -> None:
        with self._cond:
            if self._state in (LOST, CLOSED):
                return
            self._state = state
            self.cause = cause
            holds, self._holds = self._holds, set()
            self._cond.notify_all()
        self.done.set()
        for h in holds:
            h._end(f"session {state}: {cause}")
        for fn in list(self._watchers):
            fn(state)

    def lost(self, cause: str) -> None:
        """Marks the session lost (the service answered SessionExpired)."""
        self._end(LOST, cause)

    # --- holds ----------------------------------------------------------------------

    def _register(self, hold) -> None:
        with self._cond:
            if self._state in (LOST, CLOSED):
                raise SessionExpired(f"session {self.lease:x} is {self._state}")
            self._holds.add(hold)

    def _unregister(self, hold) -> None:
        with self._cond:
            self._holds.discard(hold)

    def _fields(self, req):
        """req with the session's lease, TTL and lease key (it may create the lease on its shard)."""
        req.lease, req.ttl, req.lease_key = self.lease, self.ttl_ms, self._key
        return req

    def lock(self, path: str, **kw):
        """An exclusive lock on path held by this session: see :class:`~warden.locks.Lock`."""
        from .locks import Lock
        return Lock(self, path, **kw)

    def rlock(self, path: str, **kw):
        """A shared lock on path (readers share it; a writer excludes them)."""
        from .locks import Lock
        return Lock(self, path, shared=True, **kw)

    def semaphore(self, path: str, permits: int, **kw):
        """A counting semaphore of permits on path: see :class:`~warden.locks.Semaphore`."""
        from .locks import Semaphore
        return Semaphore(self, path, permits, **kw)

    def lock_all(self, paths, *, timeout: float | None = None, shared: bool = False, **kw):
        """Takes every path, all or nothing: see :class:`~warden.locks.MultiLock`."""
        from .locks import MultiLock
        return MultiLock._take(self, list(paths), timeout=timeout, shared=shared, **kw)

    def election(self, path: str, **kw):
        """The election at path, campaigned for by this session."""
        from .election import Election
        return Election(self, path, **kw)

    # --- closing --------------------------------------------------------------------

    def close(self, timeout: float | None = None) -> None:
        """Ends the session: revokes the lease, releasing its locks, waiters,
        candidacies and ephemeral keys."""
        with self._cond:
            was = self._state
        if was not in (LOST, CLOSED) and not self.client.closed:
            req = wire.Request(op=Op.REVOKE, lease=self.lease)
            try:
                self.client._call(req, timeout=timeout, mutate=True)
            except WardenError as e:
                if e.code not in (Code.SESSION_EXPIRED, Code.NOT_FOUND):
                    log.warning("warden: revoking session %x: %s", self.lease, e)
        self._end(CLOSED, "closed")
        self._thread.join(timeout=1)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<warden.Session lease={self.lease:#x} ttl={self.ttl}s {self.state}>"
