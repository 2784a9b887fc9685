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
from ._held import Held, tell
from .client import BACKOFF_CAP, Client, backoff
from .errors import HoldLost, SessionExpired, WardenError
from .wire import Cause, Code, Kind, Op

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

    The session hears of the holds the service ends without its doing
    (docs/protocol.md §4.12): every connection of the client opens its hold
    stream, every keepalive registers the lease on the stream of the
    connection that carries it, and keepalive answers repeat the recent
    notices. A notice of a hold marks that hold lost (:class:`HoldLost`);
    a notice that the lease ended loses the session and all its holds.
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
        self._held = Held()  # this session's holds, for the notices that end them
        self._waits: set = set()  # parked requests to end with the session
        self._closing = False
        self._watchers: list[Callable[[str], None]] = []
        sent = time.monotonic()
        self._deadline = sent + ttl
        client._sessions[self.lease] = self
        try:
            self._keepalive_once(sent, deadline=sent + client.timeout)  # checks connectivity
        except BaseException:
            client._sessions.pop(self.lease, None)
            raise
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
            raise self._expired()

    def _expired(self, why: str = "") -> SessionExpired:
        state = self.state
        return SessionExpired(f"session {self.lease:x} is {state}" + (f": {self.cause}" if self.cause else "")
                              + (f" ({why})" if why else ""))

    # --- keepalive ----------------------------------------------------------------

    def _keepalive_once(self, sent: float, deadline: float):
        req = wire.Request(op=Op.KEEPALIVE, lease=self.lease, ttl=self.ttl_ms)
        try:
            resp = self.client._call(req, deadline=deadline)
        except WardenError as e:
            if e.response is not None and e.response.events:
                self.client._noticed(e.response.events)  # error answers carry notices too (§4.2)
            if e.response is not None and self.lease in e.response.leases:
                raise self._gone(e.response) from None
            raise
        if resp.events:
            self.client._noticed(resp.events)
        if self.lease in resp.leases:
            raise self._gone(resp)
        return resp

    @staticmethod
    def _gone(resp) -> SessionExpired:
        """The error for a keepalive answer that lists the lease as gone. Such
        an answer does not say whether the lease expired or was revoked (only
        the pushed lease-end notice does): its holds are lost as expired."""
        return SessionExpired("the service lists the lease as gone (expired or revoked)", response=resp)

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

    def _end(self, state: str, cause: str, lease_cause: int = Cause.EXPIRED) -> None:
        with self._cond:
            if self._state in (LOST, CLOSED):
                return
            if self._closing:  # the lease ends by close(): whatever else noticed it first
                state, cause = CLOSED, "closed"
            self._state = state
            self.cause = cause
            holds = self._held.clear()
            waits, self._waits = self._waits, set()
            self._cond.notify_all()
        self.client._sessions.pop(self.lease, None)
        self.done.set()
        for w in waits:
            w.fire(self._expired())
        for h in holds:
            if state == CLOSED:
                h._end("session closed")
            else:
                h._lose(HoldLost(h.path, h.token, lease_cause, session_ended=True,
                                 detail=f"session {self.lease:x} lost: {cause}"))
        for fn in list(self._watchers):
            fn(state)

    def lost(self, cause: str) -> None:
        """Marks the session lost (the service answered SessionExpired)."""
        self._end(LOST, cause)

    # --- hold notices -------------------------------------------------------------

    def _noticed(self, ev: wire.Event) -> None:
        """A notice of this session's lease (see Client._noticed); never blocks."""
        if ev.kind == Kind.LEASE_ENDED:
            if self._closing:
                return  # our own revoke
            why = f"the service ended the lease ({ev.cause_name})"
            threading.Thread(target=self._end, args=(LOST, why, ev.cause), name=f"warden-lost-{self.lease:x}",
                             daemon=True).start()  # watchers may call the service: not on a reader thread
            return
        with self._cond:
            hold = self._held.take(ev)
        if hold is not None:
            tell(hold, ev)

    # --- holds ----------------------------------------------------------------------

    def _register(self, hold, keys) -> None:
        """Registers hold under its (path, token) keys, for the notices; raises
        SessionExpired when the session has ended."""
        with self._cond:
            if self._state in (LOST, CLOSED):
                raise self._expired()
            missed = self._held.add(hold, keys)
        for ev in missed:
            tell(hold, ev)

    def _unregister(self, keys) -> None:
        with self._cond:
            self._held.remove(keys)

    def _waiting(self, abort) -> None:
        """abort fires when the session ends (at once if it has)."""
        with self._cond:
            if self._state not in (LOST, CLOSED):
                self._waits.add(abort)
                return
        abort.fire(self._expired())

    def _waited(self, abort) -> None:
        with self._cond:
            self._waits.discard(abort)

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
            self._closing = True
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
