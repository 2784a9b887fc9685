"""Locks held by a session, single-lock leases, semaphores and multi-locks."""

from __future__ import annotations

import secrets
import threading
import time

from . import wire
from ._routing import Routes
from .errors import (Conflict, LockDelayed, NotHolder, SessionExpired, StaleToken, WardenError)
from .wire import Code, Flag, Op

_DEFAULT = object()


def random_owner() -> str:
    """An owner name unique to one holder: two Lock objects of one session
    exclude each other like two threading.Lock users."""
    return secrets.token_hex(8)


def _lock_delay_ms(lock_delay: float | None) -> int:
    if lock_delay is None:
        return 0  # the shard's default
    if lock_delay <= 0:
        return -1  # none for this lock
    return max(int(lock_delay * 1000), 1)


class _Hold:
    """What every kind of hold shares: its token, its end, and why it ended."""

    def __init__(self, path: str):
        self.path = path
        self.token = 0
        self.signed: wire.SignedGrant | None = None
        self.done = threading.Event()
        self.done.set()  # not held yet
        self.end_cause = ""

    def _end(self, cause: str) -> None:
        self.end_cause = cause
        self.done.set()


class Lock(_Hold):
    """A lock on a path owned by a session (exclusive, or shared with ``shared=True``).

    ``with session.lock(path) as lock: use(lock.token)`` waits in FIFO order
    for the lock (``timeout`` None: as long as it takes) and releases it on
    leaving the block. Acquiring a held Lock again is reentrant: the hold
    count goes up and the token stays; each release takes one hold back.
    ``lock.done`` is set, and ``lock.held`` turns False, when the hold ends
    for any reason, the session's loss included (at the session's local
    deadline, which falls before the service's).
    """

    def __init__(self, session, path: str, *, shared: bool = False, owner: str | None = None,
                 timeout: float | None = None, revocable: bool = False, lock_delay: float | None = None,
                 signed: bool = False, permits: int = 0):
        super().__init__(path)
        self.session = session
        self.owner = owner or random_owner()
        self.shared = shared or permits > 0
        self.timeout = timeout
        self.count = 0
        self._flags = (Flag.REVOCABLE if revocable else 0) | (Flag.SIGNED if signed else 0)
        self._lock_delay = _lock_delay_ms(lock_delay)
        self._permits = permits
        self._mu = threading.Lock()

    @property
    def held(self) -> bool:
        return self.count > 0 and not self.done.is_set() and self.session.alive

    def _request(self):
        req = wire.Request(op=Op.ACQUIRE, path=self.path, mode=wire.SHARED if self.shared else wire.EXCLUSIVE,
                           owner=self.owner, flags=self._flags, lock_delay=self._lock_delay, permits=self._permits)
        return self.session._fields(req)

    def acquire(self, timeout=_DEFAULT) -> int:
        """Takes the lock and returns its fencing token.

        timeout: None waits until granted, 0 tries once (Conflict or
        LockDelayed when it cannot be granted now), else at most that many
        seconds (Timeout). Defaults to the lock's own timeout.
        """
        if timeout is _DEFAULT:
            timeout = self.timeout
        self.session.check()
        c = self.session.client
        try:
            resp = c._parked(self._request(), timeout, self._give_back)
        except SessionExpired:
            self.session.lost("the service answered SessionExpired")
            raise
        with self._mu:
            first = self.count == 0
            self.token, self.count = resp.token, resp.count or self.count + 1
            if resp.signed is not None:
                self.signed = resp.signed
            if first:
                self.end_cause = ""
                self.done.clear()
                try:
                    self.session._register(self)
                except SessionExpired:
                    self._end("session ended while acquiring")
                    raise
        return self.token

    def try_acquire(self) -> bool:
        """Takes the lock if it can be granted now; False when it is held elsewhere."""
        try:
            self.acquire(timeout=0)
        except (Conflict, LockDelayed):
            return False
        return True

    def _give_back(self, token: int) -> None:
        self.session.client.release(self.path, token, lease=self.session.lease, owner=self.owner)

    def release(self) -> int:
        """Gives one hold back (by token); returns the holds left."""
        with self._mu:
            if self.count == 0:
                raise NotHolder(f"{self.path} is not held by this lock")
            token = self.token
        try:
            left = self.session.client.release(self.path, token, lease=self.session.lease, owner=self.owner)
        except (NotHolder, StaleToken, SessionExpired):
            self._end("not held any more")
            raise
        with self._mu:
            self.count = left
        if left == 0:
            self._end("released")
        return left

    def _end(self, cause: str) -> None:
        with self._mu:
            self.count = 0
        self.session._unregister(self)
        super()._end(cause)

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        if self.count and self.session.alive:
            self.release()
        elif self.count:
            self._end("session ended")

    def __repr__(self):
        return f"<warden.Lock {self.path} token={self.token} held={self.held}>"


class LockLease(_Hold):
    """A lock with a lease of its own (a single-lock lease): see Client.acquire.

    It is not kept alive: call :meth:`renew` before ``ttl`` runs out. The
    lease is counted here from when the acquire or the last renew was sent,
    so ``alive`` turns False before the service's own deadline.
    """

    def __init__(self, client, path: str, ttl: float):
        super().__init__(path)
        self.client = client
        self.ttl = ttl
        self.lease = 0
        self._deadline = 0.0

    @classmethod
    def _take(cls, client, path, ttl, *, timeout, shared, revocable, lock_delay, signed):
        ll = cls(client, path, ttl)
        req = wire.Request(op=Op.ACQUIRE, path=path, mode=wire.SHARED if shared else wire.EXCLUSIVE,
                           ttl=int(ttl * 1000), lock_delay=_lock_delay_ms(lock_delay),
                           flags=(Flag.REVOCABLE if revocable else 0) | (Flag.SIGNED if signed else 0))
        sent = time.monotonic()
        resp = client._parked(req, timeout, lambda token: client.release(path, token))
        # A grant after a wait started its lease when it was granted, which
        # is after the send: counting from the send is on the safe side.
        ll.token, ll.lease, ll.signed = resp.token, resp.lease, resp.signed
        ll._deadline = sent + ttl
        ll.done.clear()
        return ll

    @property
    def alive(self) -> bool:
        return not self.done.is_set() and time.monotonic() < self._deadline

    held = alive

    def renew(self, ttl: float | None = None) -> None:
        """Restarts the lease with ttl seconds (default: the last TTL)."""
        ttl = self.ttl if ttl is None else ttl
        req = wire.Request(op=Op.RENEW, path=self.path, token=self.token, ttl=int(ttl * 1000))
        sent = time.monotonic()
        try:
            self.client._call(req, mutate=True)
        except (NotHolder, StaleToken, SessionExpired):
            self._end("the lease ended")
            raise
        self.ttl = ttl
        self._deadline = sent + ttl

    def release(self) -> None:
        try:
            self.client.release(self.path, self.token)
        except (NotHolder, StaleToken):
            self._end("not held any more")
            raise
        self._end("released")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if not self.done.is_set():
            try:
                self.release()
            except WardenError:
                if exc[0] is None:
                    raise


class Permit(Lock):
    """One permit of a semaphore, with its own fencing token."""

    def __enter__(self):
        return self  # taken by Semaphore.acquire already


class Semaphore:
    """A counting semaphore of ``permits`` on a path, owned by a session.

    Each permit is a shared hold with its own token; waiters are served in
    FIFO order. A permit conflicts with exclusive locks on the path's
    ancestors and descendants, like any shared lock.
    """

    def __init__(self, session, path: str, permits: int, *, timeout: float | None = None, **kw):
        if permits <= 0:
            raise ValueError("warden: a semaphore needs at least one permit")
        self.session, self.path, self.permits, self.timeout = session, path, permits, timeout
        self._kw = kw

    def acquire(self, timeout=_DEFAULT) -> Permit:
        """One permit (release it, or use it as a context manager)."""
        p = Permit(self.session, self.path, permits=self.permits, **self._kw)
        p.acquire(self.timeout if timeout is _DEFAULT else timeout)
        return p

    def try_acquire(self) -> Permit | None:
        try:
            return self.acquire(timeout=0)
        except (Conflict, LockDelayed):
            return None


class MultiLock:
    """Several paths held all or nothing by one owner of a session.

    Paths are taken in one global order (the start key of the range serving
    each path, then the path), each shard's group atomically with
    acquire.multi; when a group cannot be granted now and the caller waits,
    its paths are taken one by one in the same order. So two MultiLocks
    never deadlock each other, and a failure releases everything taken
    (docs/protocol.md §4.7).
    """

    def __init__(self, session, owner: str):
        self.session = session
        self.owner = owner
        self.tokens: dict[str, int] = {}
        self.done = threading.Event()

    @classmethod
    def _take(cls, session, paths: list[str], *, timeout, shared, owner: str | None = None,
              revocable: bool = False, lock_delay: float | None = None):
        ml = cls(session, owner or random_owner())
        groups = _shard_groups(session.client, sorted(set(paths)))
        end = None if timeout is None else time.monotonic() + timeout
        mode = wire.SHARED if shared else wire.EXCLUSIVE
        flags = Flag.REVOCABLE if revocable else 0
        try:
            for group in groups:
                req = session._fields(wire.Request(op=Op.ACQUIRE_MULTI, path=group[0], paths=group, mode=mode,
                                                   owner=ml.owner, flags=flags,
                                                   lock_delay=_lock_delay_ms(lock_delay)))
                try:
                    resp = session.client._call(req, mutate=True)
                    for h in resp.holders:
                        ml.tokens[h.path] = h.token
                    continue
                except (Conflict, LockDelayed):
                    if timeout == 0:
                        raise
                for p in group:
                    left = None if end is None else max(end - time.monotonic(), 0.001)
                    one = session._fields(wire.Request(op=Op.ACQUIRE, path=p, mode=mode, owner=ml.owner, flags=flags,
                                                       lock_delay=_lock_delay_ms(lock_delay)))
                    give_back = lambda token, p=p: session.client.release(p, token, lease=session.lease, owner=ml.owner)
                    ml.tokens[p] = session.client._parked(one, left, give_back).token
        except BaseException:
            ml.release()
            raise
        session._register(ml)
        return ml

    @property
    def held(self) -> bool:
        return bool(self.tokens) and not self.done.is_set() and self.session.alive

    def release(self) -> None:
        """Releases every path (errors after the first are logged, not raised)."""
        first = None
        for path, token in list(self.tokens.items()):
            try:
                self.session.client.release(path, token, lease=self.session.lease, owner=self.owner)
            except WardenError as e:
                first = first or e
            del self.tokens[path]
        self._end("released")
        if first is not None and first.code not in (Code.NOT_HOLDER, Code.STALE_TOKEN, Code.SESSION_EXPIRED):
            raise first

    def _end(self, cause: str) -> None:
        self.session._unregister(self)
        self.done.set()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.tokens:
            self.release()


def _shard_groups(client, paths: list[str]) -> list[list[str]]:
    """paths cut into per-shard groups, in the global order (range start, path)."""
    routes = client._routes
    if routes is None or not routes.loaded:
        routes = Routes()
        table = client._call(wire.Request(op=Op.RANGES)).table
        if table is None:
            raise WardenError("the service sent no route table", code=Code.INTERNAL)
        routes.load(table)
    keyed = []
    for p in paths:
        r = routes.range_of(p)
        keyed.append((r.start if r else b"", p, r.shard if r else 0))
    keyed.sort()
    groups: list[list[str]] = []
    last = None
    for _, p, shard in keyed:
        if shard != last or not shard:
            groups.append([])
            last = shard
        groups[-1].append(p)
    return groups
