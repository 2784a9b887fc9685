"""Locks held by a session, single-lock leases, semaphores and multi-locks."""

from __future__ import annotations

import logging
import secrets
import threading
import time
from typing import Callable

from . import wire
from ._routing import Routes
from .errors import (Conflict, HoldLost, LockDelayed, NotHolder, SessionExpired, StaleToken, WardenError)
from .revoke import RevokeRequest, RevokeRequests, call_on_requests
from .wire import Cause, Code, Flag, Op

log = logging.getLogger("warden")

_DEFAULT = object()
_losing = threading.Lock()  # makes one loss of a hold the only one
_ending = threading.Lock()  # orders an end of a hold with the watchers of its end


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
    """What every kind of hold shares: its token, its end, and why it ended.

    ``done`` is set when the hold ends for any reason. ``lost`` is None while
    the hold lives and after its holder gave it back; once the service ended
    it without the holder's doing, or the session ended, it is the
    :class:`HoldLost` that says why. :meth:`wait_lost` waits for that,
    :meth:`on_lost` calls back.
    """

    def __init__(self, path: str):
        self.path = path
        self.token = 0
        self.signed: wire.SignedGrant | None = None
        self.done = threading.Event()
        self.done.set()  # not held yet
        self.end_cause = ""
        self.lost: HoldLost | None = None
        self._callbacks: list[Callable[[HoldLost], None]] = []
        self._enders: list[Callable[[], None]] = []

    def _end(self, cause: str) -> None:
        self.end_cause = cause
        with _ending:
            self.done.set()
            enders, self._enders = self._enders, []
        for fn in enders:
            fn()

    def _when_done(self, fn: Callable[[], None]) -> None:
        """Calls fn() once the current hold ends (at once if it has), on the
        thread that ends it: fn must not block. warden.aio wakes its event
        loop with it."""
        with _ending:
            if not self.done.is_set():
                self._enders.append(fn)
                return
        fn()

    def _forget_done(self, fn: Callable[[], None]) -> None:
        with _ending:
            if fn in self._enders:
                self._enders.remove(fn)

    def _begin(self) -> None:
        """The hold starts (a first grant)."""
        self.end_cause = ""
        self.lost = None
        self.done.clear()

    def _lose(self, err: HoldLost, key=None) -> None:
        """The hold ended without its holder's doing (key: the (path, token)
        the notice named). Called on reader and keepalive threads: the
        callbacks run on a thread of their own."""
        with _losing:
            if self.done.is_set() or self.lost is not None:
                return  # ended already, or lost on another thread (a push and a keepalive answer)
            self.lost = err
        self._gone(key)
        self._end(str(err))
        callbacks = list(self._callbacks)
        if callbacks:
            threading.Thread(target=self._call_back, args=(callbacks, err), name="warden-hold-lost",
                             daemon=True).start()

    def _gone(self, key) -> None:
        """Forgets what the service no longer holds."""

    @staticmethod
    def _call_back(callbacks, err: HoldLost) -> None:
        for fn in callbacks:
            try:
                fn(err)
            except Exception:
                log.exception("warden: hold-lost callback")

    def wait_lost(self, timeout: float | None = None) -> HoldLost | None:
        """Waits until the hold ends (at most timeout seconds; None: as long as
        it takes) and returns the :class:`HoldLost` when it was lost; None
        when it is still held, or ended by its holder."""
        self.done.wait(timeout)
        return self.lost

    def on_lost(self, fn: Callable[[HoldLost], None]) -> None:
        """Calls fn(HoldLost) on a thread of its own when the hold is lost (at
        once if it already was)."""
        self._callbacks.append(fn)
        err = self.lost
        if err is not None:
            threading.Thread(target=self._call_back, args=([fn], err), daemon=True).start()

    def _client(self):
        raise NotImplementedError

    def revoke_requests(self) -> RevokeRequests:
        """The service's requests to give the current hold back (a waiter's,
        on a ``revocable`` lock, or an admin's), as a :class:`RevokeRequests`
        iterator that ends when the hold is released. Release before the
        request's ``deadline``: at the deadline the service revokes the hold
        and :attr:`lost` becomes ``HoldLost(forced)``."""
        if self.done.is_set():
            raise NotHolder(f"{self.path} is not held")
        return RevokeRequests(self._client(), self.path, self.token)

    def on_revoke_requested(self, fn: Callable[[RevokeRequest], None]) -> None:
        """Calls fn(RevokeRequest) on a thread of its own for each request to
        give the current hold back (one already pending first), until the
        hold ends."""
        reqs = self.revoke_requests()
        threading.Thread(target=call_on_requests, args=(reqs, self.done, fn), name="warden-revoke-requests",
                         daemon=True).start()

    def _lost_in_block(self, exc_type) -> None:
        """Raises the loss on leaving a with block that raised nothing else:
        what ran in it was not protected to its end."""
        if self.lost is not None and exc_type is None:
            raise self.lost


class Lock(_Hold):
    """A lock on a path owned by a session (exclusive, or shared with ``shared=True``).

    ``with session.lock(path) as lock: use(lock.token)`` waits in FIFO order
    for the lock (``timeout`` None: as long as it takes) and releases it on
    leaving the block. Acquiring a held Lock again is reentrant: the hold
    count goes up and the token stays; each release takes one hold back.
    ``lock.done`` is set, and ``lock.held`` turns False, when the hold ends
    for any reason, the session's loss included (at the session's local
    deadline, which falls before the service's). A hold the service ends
    without the holder's doing (revoked, released by an operator, its lease
    ended) makes ``lock.lost`` a :class:`HoldLost` within one keepalive
    interval; leaving the ``with`` block then raises it.
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

    alive = held

    def _client(self):
        return self.session.client

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
            resp = c._parked(self._request(), timeout, self._give_back, session=self.session)
        except SessionExpired as e:
            if e.response is not None:
                self.session.lost("the service answered SessionExpired")
            raise
        with self._mu:
            first = self.count == 0 or self.done.is_set()
            self.token, self.count = resp.token, resp.count or self.count + 1
            if resp.signed is not None:
                self.signed = resp.signed
            if first:
                self._begin()
        if first:
            try:
                self.session._register(self, [(self.path, self.token)])
            except SessionExpired:
                c._give_all_back(self._request(), resp, self._give_back)
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

    def _give_back(self, path: str, token: int) -> None:
        self.session.client.release(path, token, lease=self.session.lease, owner=self.owner)

    def release(self) -> int:
        """Gives one hold back (by token); returns the holds left.

        Raises :class:`HoldLost` (a :class:`NotHolder`) when the hold was
        lost, or the service answers that this token holds nothing any more.
        """
        with self._mu:
            if self.count == 0 or self.done.is_set():
                if self.lost is not None:
                    raise self.lost
                raise NotHolder(f"{self.path} is not held by this lock")
            token = self.token
        try:
            left = self.session.client.release(self.path, token, lease=self.session.lease, owner=self.owner)
        except (NotHolder, StaleToken) as e:
            # Ended by the service; its notice has not arrived yet.
            self._lose(HoldLost(self.path, token, Cause.NONE, detail=e.msg, response=e.response),
                       (self.path, token))
            raise self.lost or e from None
        except SessionExpired:
            self.session.lost("the service answered SessionExpired")
            raise
        with self._mu:
            self.count = left
        if left == 0:
            self._end("released")
        return left

    def _end(self, cause: str) -> None:
        with self._mu:
            self.count = 0
            token = self.token
        self.session._unregister([(self.path, token)])
        super()._end(cause)

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, exc_type, *_):
        if self.count and not self.done.is_set() and self.session.alive:
            self.release()
            return
        if self.count and not self.done.is_set():
            self._lose(HoldLost(self.path, self.token, Cause.EXPIRED, session_ended=True,
                                detail=f"session {self.session.lease:x} is {self.session.state}"))
        self._lost_in_block(exc_type)

    def __repr__(self):
        return f"<warden.Lock {self.path} token={self.token} held={self.held}>"


class LockLease(_Hold):
    """A lock with a lease of its own (a single-lock lease): see Client.acquire.

    It is not kept alive: call :meth:`renew` before ``ttl`` runs out. The
    lease is counted here from when the acquire or the last renew was sent,
    so ``alive`` turns False before the service's own deadline, and then
    ``lost`` becomes ``HoldLost(expired)``. The service tells it, as it tells
    a session's holds, when it ends the lock: ``lost`` says why (``forced``,
    ``released`` by another client, ``expired``, ``revoked``); a notice it
    missed (its connection broke), its next :meth:`renew` reports. A grant
    that came after waiting a third of ``ttl`` or more is renewed once, so
    the count starts afresh.
    """

    def __init__(self, client, path: str, ttl: float):
        super().__init__(path)
        self.client = client
        self.ttl = ttl
        self.lease = 0
        self._deadline = 0.0
        self._timer: threading.Timer | None = None
        self._timer_lock = threading.Lock()

    @classmethod
    def _take(cls, client, path, ttl, *, timeout, shared, revocable, lock_delay, signed):
        ll = cls(client, path, ttl)
        req = wire.Request(op=Op.ACQUIRE, path=path, mode=wire.SHARED if shared else wire.EXCLUSIVE,
                           ttl=int(ttl * 1000), lock_delay=_lock_delay_ms(lock_delay),
                           flags=(Flag.REVOCABLE if revocable else 0) | (Flag.SIGNED if signed else 0))
        sent = time.monotonic()
        resp = client._parked(req, timeout, lambda p, token: client.release(p, token))
        # A grant after a wait started its lease when it was granted, which
        # is after the send: counting from the send is on the safe side.
        ll.token, ll.lease, ll.signed = resp.token, resp.lease, resp.signed
        ll._begin()
        ll._arm(sent, ttl)
        client._hold_single(ll)
        if time.monotonic() - sent >= ttl / 3:
            try:
                ll.renew(ttl)  # waited: start the count again from a renewal sent now
            except WardenError:
                pass  # the count from the send stands, or the lock has ended and says so
        return ll

    def _client(self):
        return self.client

    @property
    def alive(self) -> bool:
        return not self.done.is_set() and time.monotonic() < self._deadline

    held = alive

    def renew(self, ttl: float | None = None) -> None:
        """Restarts the lease with ttl seconds (default: the last TTL). Raises
        the :class:`HoldLost` once the lock is lost (nothing sent), and
        NotHolder or StaleToken when the service had ended it."""
        ttl = self.ttl if ttl is None else ttl
        if self.lost is not None:
            raise self.lost
        req = wire.Request(op=Op.RENEW, path=self.path, token=self.token, ttl=int(ttl * 1000), lease=self.lease)
        sent = time.monotonic()
        try:
            self.client._call(req, mutate=True)
        except (NotHolder, StaleToken, SessionExpired):
            self._end("the lease ended")
            raise
        self.ttl = ttl
        self._arm(sent, ttl)

    def release(self) -> None:
        try:
            self.client.release(self.path, self.token, lease=self.lease)  # its own lease: no notice to itself
        except (NotHolder, StaleToken):
            self._end("not held any more")
            raise
        self._end("released")

    def _arm(self, sent: float, ttl: float) -> None:
        """Moves the local deadline to sent + ttl (never back) and the timer
        that loses the lock there."""
        with self._timer_lock:
            self._deadline = max(self._deadline, sent + ttl)
            self._start_timer()

    def _start_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = threading.Timer(max(self._deadline - time.monotonic(), 0), self._expire)
        self._timer.daemon = True
        self._timer.start()

    def _expire(self) -> None:
        with self._timer_lock:
            if self.done.is_set():
                return
            if time.monotonic() < self._deadline:  # a renewal moved it
                self._start_timer()
                return
        self._lose(HoldLost(self.path, self.token, Cause.EXPIRED, detail="not renewed within its TTL"),
                   (self.path, self.token))

    def _end(self, cause: str) -> None:
        with self._timer_lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        self.client._drop_single((self.path, self.token))
        super()._end(cause)

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


class MultiLock(_Hold):
    """Several paths held all or nothing by one owner of a session.

    Paths are taken in one global order (the start key of the range serving
    each path, then the path), each shard's group atomically with
    acquire.multi; when a group cannot be granted now and the caller waits,
    its paths are taken one by one in the same order. So two MultiLocks
    never deadlock each other, and a failure releases everything taken
    (docs/protocol.md §4.7). When the service ends one of the holds, the
    whole set is lost (``lost``, as for a :class:`Lock`); :meth:`release`
    gives back the others.
    """

    def __init__(self, session, owner: str):
        super().__init__("")
        self.session = session
        self.owner = owner
        self.tokens: dict[str, int] = {}

    @classmethod
    def _take(cls, session, paths: list[str], *, timeout, shared, owner: str | None = None,
              revocable: bool = False, lock_delay: float | None = None):
        session.check()
        ml = cls(session, owner or random_owner())
        client = session.client
        groups = _shard_groups(client, sorted(set(paths)))
        end = None if timeout is None else time.monotonic() + timeout
        mode = wire.SHARED if shared else wire.EXCLUSIVE
        flags = Flag.REVOCABLE if revocable else 0
        try:
            for group in groups:
                req = session._fields(wire.Request(op=Op.ACQUIRE_MULTI, path=group[0], paths=group, mode=mode,
                                                   owner=ml.owner, flags=flags,
                                                   lock_delay=_lock_delay_ms(lock_delay)))
                try:
                    resp = client._parked(req, 0, ml._give_back, session=session)
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
                    ml.tokens[p] = client._parked(one, left, ml._give_back, session=session).token
            ml.path = sorted(ml.tokens)[0] if ml.tokens else ""
            ml.token = ml.tokens.get(ml.path, 0)
            ml._begin()
            session._register(ml, list(ml.tokens.items()))
        except BaseException:
            ml._give_back_all()
            raise
        return ml

    def _give_back(self, path: str, token: int) -> None:
        self.session.client.release(path, token, lease=self.session.lease, owner=self.owner)

    @property
    def held(self) -> bool:
        return bool(self.tokens) and not self.done.is_set() and self.session.alive

    alive = held

    def _give_back_all(self):
        first = None
        for path, token in list(self.tokens.items()):
            try:
                self._give_back(path, token)
            except WardenError as e:
                first = first or e
            self.tokens.pop(path, None)
        return first

    def release(self) -> None:
        """Releases every path (errors after the first are logged, not raised).

        After a loss it gives back the paths still held and raises nothing
        more (the loss is in ``lost``)."""
        first = self._give_back_all()
        self._end("released")
        if first is not None and first.code not in (Code.NOT_HOLDER, Code.STALE_TOKEN, Code.SESSION_EXPIRED):
            raise first

    def _gone(self, key) -> None:
        if key is not None:
            self.tokens.pop(key[0], None)

    def _end(self, cause: str) -> None:
        self.session._unregister(list(self.tokens.items()))
        super()._end(cause)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *_):
        if self.tokens:
            self.release()
        self._lost_in_block(exc_type)


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
