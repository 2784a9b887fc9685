"""warden.aio: the client for asyncio programs.

    import warden.aio

    async with warden.aio.Client(["127.0.0.1:7070"]) as c, c.session(ttl=10) as s:
        async with s.lock("/locks/billing/nightly") as lock:
            await run_billing(fence=lock.token)

A facade over the thread-based client (warden.Client): the protocol, the
retries, the withdrawals and the keepalives are that client's. A call that
blocks runs on a worker thread of a pool this client owns and is awaited;
what the reader threads learn (a hold lost, a watch event, a state change)
reaches the event loop with ``call_soon_threadsafe``.

Two pools keep a release from queueing behind the waits it would end:
calls that may wait in a lock's queue (``acquire``, ``campaign``,
``lock_all``, a semaphore's ``acquire``, ``Client.acquire``) take one of
``max_workers`` threads for as long as they wait; every other call one of
``call_workers`` threads for its round trips. Watches and revocation
requests hold no thread while idle: a push wakes the loop, and a worker
drains what came.

Cancelling a task that awaits a call that takes a hold (``asyncio.timeout``
included) ends the call as the thread-based client's timeout does: the
waiting request is withdrawn from the service at once, a grant that raced
the cancellation is given back, and only then does CancelledError
propagate, so the task holds nothing and nothing of it stays queued.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import functools
import inspect
import logging
from concurrent.futures import ThreadPoolExecutor

from . import client as _client
from . import election as _election
from . import locks as _locks
from . import revoke as _revoke
from . import session as _session
from . import watch as _watch
from .client import Interrupted, _Abort, _interrupt
from .errors import NotHolder, error_for
from .locks import _DEFAULT
from .wire import Code

log = logging.getLogger("warden")

__all__ = ["Client", "Session", "Lock", "Permit", "Semaphore", "MultiLock", "LockLease", "Election", "Watch",
           "RevokeRequests", "Observer"]

_NOTHING = object()
_DRAIN_MAX = 1024  # items one worker turn takes from a stream


def _to_loop(loop: asyncio.AbstractEventLoop, fn, *args) -> None:
    """fn(*args) on loop's thread, from any thread; dropped once the loop has
    closed (nobody waits any more)."""
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:
        pass


def _resolve(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


def _retrieve(fut) -> None:
    """Marks fut's outcome as seen: one nobody awaits any more is not an error."""
    if not fut.cancelled():
        fut.exception()


async def _finished(fut: asyncio.Future) -> None:
    """Waits until fut is done, through further cancellations of the awaiting
    task: the caller raises its CancelledError once what it started is settled."""
    while not fut.done():
        try:
            await asyncio.wait({fut})
        except asyncio.CancelledError:
            continue


def _closed() -> BaseException:
    return error_for(Code.CLOSED, "client closed")


def _blocking(sync_cls, name: str):
    """An async method running the sync object's method name on a call
    thread (it takes nothing: a cancellation propagates at once), with its
    exact signature and documentation."""
    sync_fn = getattr(sync_cls, name)

    async def method(self, *args, **kw):
        return await self._c._run(functools.partial(getattr(self.sync, name), *args, **kw))

    method.__name__ = method.__qualname__ = name
    method.__doc__ = sync_fn.__doc__
    method.__signature__ = inspect.signature(sync_fn)
    return method


class _Opening:
    """A call that yields an object to use, either way: ``x = await op`` or
    ``async with op as x`` (leaving the block exits x's own block)."""

    def __init__(self, open_fn, *args):
        self._open = functools.partial(open_fn, *args)
        self._obj = None

    def __await__(self):
        return self._open().__await__()

    async def __aenter__(self):
        self._obj = await self._open()
        return await self._obj.__aenter__()

    async def __aexit__(self, *exc):
        return await self._obj.__aexit__(*exc)


class _Facade:
    """Reads the non-blocking attributes listed in _attrs from the sync object."""

    _attrs: tuple[str, ...] = ()

    def __getattr__(self, name: str):
        if name in type(self)._attrs and "sync" in self.__dict__:
            return getattr(self.sync, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


class _Closing:
    """``async with x`` closes x on leaving."""

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()


class Client(_Closing, _Facade):
    """A Warden client for asyncio: ``warden.aio.Client(endpoints, **kw)``
    takes the keyword arguments of :class:`warden.Client`, plus
    ``max_workers`` (threads for calls that wait in a queue) and
    ``call_workers`` (threads for the other calls). Use it with
    ``async with``, or ``await client.close()``. ``sync`` is the
    thread-based client underneath."""

    _attrs = ("endpoints", "timeout", "id", "closed")

    def __init__(self, endpoints, *, max_workers: int = 64, call_workers: int = 16, **kw):
        if max_workers < 1 or call_workers < 1:
            raise ValueError("warden: max_workers and call_workers must be at least 1")
        self.sync = _client.Client(endpoints, **kw)
        self._c = self
        self._waits = ThreadPoolExecutor(max_workers, thread_name_prefix="warden-aio-wait")
        self._calls = ThreadPoolExecutor(call_workers, thread_name_prefix="warden-aio-call")
        self._tasks: set[asyncio.Task] = set()

    # --- running blocking calls ----------------------------------------------------

    async def _run(self, fn, *args, give_back=None, wait: bool = False):
        """fn(*args) on a worker thread (of the waits' pool with wait).

        When the awaiting task is cancelled, the call's abort fires: a wait
        in a lock's queue ends at once and is withdrawn (warden.Client's
        _parked). With give_back, which takes what fn returns and gives it
        back, the cancellation propagates only once the call has ended and
        what it returned, a grant that raced the cancellation, is given
        back. Without, it propagates at once and the call ends in its thread.
        """
        if self.sync.closed:
            raise _closed()
        abort = _Abort()
        ctx = contextvars.copy_context()
        ctx.run(_interrupt.set, abort)
        try:
            cf = (self._waits if wait else self._calls).submit(ctx.run, fn, *args)
        except RuntimeError:  # the pool has shut down
            raise _closed() from None
        fut = asyncio.wrap_future(cf)
        fut.add_done_callback(_retrieve)
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            abort.fire(Interrupted("the awaiting task was cancelled"))
            if cf.cancel() or give_back is None:
                raise  # not started (nothing sent), or nothing to give back
            await _finished(fut)
            if not fut.cancelled() and fut.exception() is None:
                await self._give_back(give_back, fut.result())
            raise

    async def _give_back(self, give_back, taken) -> None:
        try:
            gb = asyncio.wrap_future(self._calls.submit(give_back, taken))
        except RuntimeError:
            log.warning("warden: client closed before %r was given back", taken)
            return
        await _finished(gb)
        if not gb.cancelled() and gb.exception() is not None:
            log.warning("warden: giving back %r after a cancellation: %s", taken, gb.exception())

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_retrieve)
        return task

    def _invoke(self, fn, *args) -> None:
        """A user's callback, on the loop; a coroutine it returns runs as a task."""
        try:
            r = fn(*args)
        except Exception:
            log.exception("warden: callback")
            return
        if inspect.isawaitable(r):
            self._spawn(_logged(r))

    # --- lifecycle ----------------------------------------------------------------------

    async def close(self) -> None:
        """Closes every connection (calls in flight end with Closed) and the pools."""
        self.sync.close()  # closes sockets only: does not block
        self._waits.shutdown(wait=False)
        self._calls.shutdown(wait=False)

    # --- sessions and single locks ------------------------------------------------------

    def session(self, ttl: float = 10.0) -> _Opening:
        """A new :class:`Session`: ``async with client.session(ttl=10) as s``
        (closed on leaving the block) or ``s = await client.session(10)``."""
        return _Opening(self._open_session, ttl)

    async def _open_session(self, ttl: float) -> Session:
        return Session(self, await self._run(self.sync.session, ttl, give_back=_session.Session.close))

    def acquire(self, path: str, ttl: float, **kw) -> _Opening:
        """A :class:`LockLease` (see warden.Client.acquire): ``lease = await
        client.acquire(path, ttl)``, or ``async with`` (released on leaving)."""
        return _Opening(self._acquire, path, ttl, kw)

    async def _acquire(self, path: str, ttl: float, kw: dict) -> LockLease:
        sync = await self._run(functools.partial(self.sync.acquire, path, ttl, **kw),
                               give_back=_locks.LockLease.release, wait=kw.get("timeout") != 0)
        return LockLease(self, sync)

    release = _blocking(_client.Client, "release")

    # --- key-value and queries ----------------------------------------------------------

    async def put(self, key: str, value, *, session=None, **kw) -> int:
        """Writes key (see warden.Client.put); session: an aio or sync Session."""
        sync_session = session.sync if isinstance(session, Session) else session
        return await self._run(functools.partial(self.sync.put, key, value, session=sync_session, **kw))

    async def cas(self, key: str, value, version: int, **kw) -> int:
        """Writes key only if its version is version (0: only if it does not exist)."""
        return await self.put(key, value, expect_version=version, **kw)

    get = _blocking(_client.Client, "get")
    delete = _blocking(_client.Client, "delete")
    list = _blocking(_client.Client, "list")
    lock_info = _blocking(_client.Client, "lock_info")
    list_locks = _blocking(_client.Client, "list_locks")
    leader = _blocking(_client.Client, "leader")
    status = _blocking(_client.Client, "status")
    revoke_lock = _blocking(_client.Client, "revoke_lock")

    # --- streams ---------------------------------------------------------------------------

    def watch(self, path: str, **kw) -> Watch:
        """Events on path (see warden.Client.watch) as an async iterator; the
        subscription starts now (call it inside a coroutine)."""
        return Watch(self, functools.partial(self.sync.watch, path, **kw))

    def revoke_requests(self, path: str, token: int = 0) -> RevokeRequests:
        """The service's requests to give back the hold with token on path, as an async iterator."""
        return RevokeRequests(self, functools.partial(self.sync.revoke_requests, path, token))

    def observe(self, path: str) -> Observer:
        """Leader changes of the election at path, as an async iterator."""
        return Observer(self, functools.partial(self.sync.observe, path))


async def _logged(aw) -> None:
    try:
        await aw
    except Exception:
        log.exception("warden: callback")


class Session(_Closing, _Facade):
    """A session of :class:`Client` (see warden.Session); ``sync`` is the
    thread-based one. ``done`` is its threading.Event: read it, never wait
    on it in a coroutine."""

    _attrs = ("lease", "ttl", "ttl_ms", "state", "alive", "done", "deadline", "cause")

    def __init__(self, client: Client, sync: _session.Session):
        self.client = self._c = client
        self.sync = sync

    def check(self) -> None:
        """Raises SessionExpired when the session is lost or closed."""
        self.sync.check()

    def on_state(self, fn) -> None:
        """Calls fn(state) on this event loop on every state change (a
        coroutine fn runs as a task)."""
        loop = asyncio.get_running_loop()
        self.sync.on_state(lambda state: _to_loop(loop, self._c._invoke, fn, state))

    def lock(self, path: str, **kw) -> Lock:
        return Lock(self, self.sync.lock(path, **kw))

    def rlock(self, path: str, **kw) -> Lock:
        return Lock(self, self.sync.rlock(path, **kw))

    def semaphore(self, path: str, permits: int, **kw) -> Semaphore:
        return Semaphore(self, self.sync.semaphore(path, permits, **kw))

    def lock_all(self, paths, *, timeout: float | None = None, **kw) -> _Opening:
        """A :class:`MultiLock`: ``async with s.lock_all(paths) as ml`` or ``ml = await s.lock_all(paths)``."""
        return _Opening(self._lock_all, list(paths), timeout, kw)

    async def _lock_all(self, paths, timeout, kw) -> MultiLock:
        sync = await self._c._run(functools.partial(self.sync.lock_all, paths, timeout=timeout, **kw),
                                  give_back=_locks.MultiLock.release, wait=timeout != 0)
        return MultiLock(self, sync)

    def election(self, path: str, **kw) -> Election:
        return Election(self, self.sync.election(path, **kw))

    close = _blocking(_session.Session, "close")

    def __repr__(self):
        return f"<warden.aio.Session lease={self.sync.lease:#x} ttl={self.sync.ttl}s {self.sync.state}>"


class _Hold(_Facade):
    """What every kind of hold shares (see warden.locks._Hold)."""

    _attrs = ("path", "token", "signed", "done", "end_cause", "lost")

    async def wait_lost(self, timeout: float | None = None):
        """Waits until the hold ends (at most timeout seconds) and returns the
        HoldLost when it was lost; None when still held, or ended by its holder."""
        sync = self.sync
        if not sync.done.is_set():
            loop = asyncio.get_running_loop()
            ended = loop.create_future()

            def wake() -> None:
                _to_loop(loop, _resolve, ended)

            sync._when_done(wake)
            try:
                await asyncio.wait({ended}, timeout=timeout)
            finally:
                sync._forget_done(wake)
        return sync.lost

    def on_lost(self, fn) -> None:
        """Calls fn(HoldLost) on this event loop when the hold is lost (a
        coroutine fn runs as a task)."""
        loop = asyncio.get_running_loop()
        self.sync.on_lost(lambda err: _to_loop(loop, self._c._invoke, fn, err))

    def revoke_requests(self) -> RevokeRequests:
        """The requests to give the current hold back, as an async iterator
        that ends when the hold is released."""
        if self.sync.done.is_set():
            raise NotHolder(f"{self.sync.path} is not held")
        return RevokeRequests(self._c, self.sync.revoke_requests)

    def on_revoke_requested(self, fn) -> None:
        """Calls fn(RevokeRequest) on this event loop for each request to give
        the current hold back, until the hold ends."""
        requests = self.revoke_requests()
        c = self._c

        async def pump() -> None:
            async for r in requests:
                c._invoke(fn, r)

        task = c._spawn(pump())
        loop = asyncio.get_running_loop()
        self.sync._when_done(lambda: _to_loop(loop, task.cancel))

    async def __aenter__(self):
        return self

    async def __aexit__(self, exc_type, exc, tb):
        await self._c._run(self.sync.__exit__, exc_type, exc, tb)


class Lock(_Hold):
    """A lock of a :class:`Session` (see warden.Lock). ``async with
    s.lock(path) as lock`` acquires it and releases it on leaving."""

    _attrs = _Hold._attrs + ("count", "held", "alive", "owner", "shared", "timeout")

    def __init__(self, session: Session, sync: _locks.Lock):
        self.session = session
        self._c = session.client
        self.sync = sync

    async def acquire(self, timeout=_DEFAULT) -> int:
        """Takes the lock and returns its fencing token (see warden.Lock.acquire).
        Cancelling the awaiting task withdraws the wait and gives back a grant
        that raced it: nothing more is held or queued when CancelledError
        propagates."""
        if timeout is _DEFAULT:
            timeout = self.sync.timeout
        return await self._c._run(self.sync.acquire, timeout, give_back=self._give_back, wait=timeout != 0)

    async def try_acquire(self) -> bool:
        """Takes the lock if it can be granted now; False when it is held elsewhere."""
        return await self._c._run(self.sync.try_acquire, give_back=self._give_back)

    def _give_back(self, taken) -> None:
        """Gives back the one hold an acquire (a token) or a try (True) took."""
        if taken:
            self.sync.release()

    release = _blocking(_locks.Lock, "release")

    async def __aenter__(self):
        await self.acquire()
        return self

    def __repr__(self):
        return f"<warden.aio.Lock {self.sync.path} token={self.sync.token} held={self.sync.held}>"


class Permit(Lock):
    """One permit of a :class:`Semaphore`: held already; leaving its block releases it."""

    async def __aenter__(self):
        return self


class Semaphore(_Facade):
    """A counting semaphore of a :class:`Session` (see warden.Semaphore)."""

    _attrs = ("path", "permits", "timeout")

    def __init__(self, session: Session, sync: _locks.Semaphore):
        self.session = session
        self._c = session.client
        self.sync = sync

    def acquire(self, timeout=_DEFAULT) -> _Opening:
        """One :class:`Permit`: ``async with sem.acquire() as permit`` or ``permit = await sem.acquire()``."""
        return _Opening(self._acquire, self.sync.timeout if timeout is _DEFAULT else timeout)

    async def _acquire(self, timeout) -> Permit:
        p = await self._c._run(self.sync.acquire, timeout, give_back=_locks.Permit.release, wait=timeout != 0)
        return Permit(self.session, p)

    async def try_acquire(self) -> Permit | None:
        p = await self._c._run(self.sync.try_acquire, give_back=_release_permit)
        return None if p is None else Permit(self.session, p)


class MultiLock(_Hold):
    """Paths held all or nothing (see warden.MultiLock)."""

    _attrs = _Hold._attrs + ("tokens", "held", "alive", "owner")

    def __init__(self, session: Session, sync: _locks.MultiLock):
        self.session = session
        self._c = session.client
        self.sync = sync

    release = _blocking(_locks.MultiLock, "release")


class LockLease(_Hold):
    """A lock with a lease of its own (see warden.LockLease): renew it."""

    _attrs = _Hold._attrs + ("lease", "ttl", "alive", "held")

    def __init__(self, client: Client, sync: _locks.LockLease):
        self.client = self._c = client
        self.sync = sync

    renew = _blocking(_locks.LockLease, "renew")
    release = _blocking(_locks.LockLease, "release")


class Election(_Hold):
    """A candidacy of a :class:`Session` (see warden.Election); leaving
    ``async with`` resigns a leadership."""

    _attrs = _Hold._attrs + ("is_leader", "held", "alive", "owner", "priority")

    def __init__(self, session: Session, sync: _election.Election):
        self.session = session
        self._c = session.client
        self.sync = sync

    async def campaign(self, value: bytes | str = b"", timeout: float | None = None) -> int:
        """Returns the leadership token once elected (see warden.Election.campaign).
        Cancelling the awaiting task withdraws the candidacy, and resigns a
        leadership that raced the cancellation."""
        return await self._c._run(self.sync.campaign, value, timeout, give_back=self._resign, wait=timeout != 0)

    def _resign(self, token: int) -> None:
        self.sync.resign()

    proclaim = _blocking(_election.Election, "proclaim")
    resign = _blocking(_election.Election, "resign")
    handover = _blocking(_election.Election, "handover")
    leader = _blocking(_election.Election, "leader")

    def observe(self) -> Observer:
        """Leader changes of this election, as an async iterator."""
        return self._c.observe(self.sync.path)


def _release_permit(permit: _locks.Permit | None) -> None:
    if permit is not None:
        permit.release()


# ---------------------------------------------------------------------------------------
# streams


class _Stream:
    """Items of a sync stream fed by a watch's pushes, as an async iterator.

    The subscription is opened on a worker at once. Afterwards a push wakes
    the loop (the watch's _notify), and a worker drains what came without
    waiting, so an idle stream holds no thread. ``async for`` closes the
    stream when the loop ends, breaks or raises; so does ``close()`` or
    leaving ``async with``.
    """

    def __init__(self, client: Client, open_fn):
        self._c = client
        self._sync = None
        self._ready = asyncio.Event()
        self._buf: collections.deque = collections.deque()
        self._turn = asyncio.Lock()
        self._closed = False
        self._opening = client._spawn(self._open(open_fn))

    async def _open(self, open_fn):
        sync = await self._c._run(open_fn, give_back=type(self)._close_sync)
        loop = asyncio.get_running_loop()
        self._watch_of(sync)._notify = lambda: _to_loop(loop, self._ready.set)
        self._sync = sync
        self._ready.set()  # what came before the hook
        return sync

    @staticmethod
    def _watch_of(sync) -> _watch.Watch:
        return sync

    @staticmethod
    def _close_sync(sync) -> None:
        sync.close()

    def _ended(self, sync) -> bool:
        return sync._closed.is_set()

    def _drain(self, sync) -> list:
        out = []
        while len(out) < _DRAIN_MAX:
            item = sync.get(0)
            if item is None:
                break
            out.append(item)
        return out

    async def _opened(self):
        """The sync stream once subscribed; None once closed."""
        if not self._closed:
            try:
                return await asyncio.shield(self._opening)
            except asyncio.CancelledError:
                if not self._opening.cancelled():
                    raise  # the awaiting task's own cancellation
        return None

    async def _next(self, timeout: float | None):
        """The next item, or _NOTHING when timeout passes first or the stream has ended."""
        sync = await self._opened()
        if sync is None:
            return _NOTHING
        loop = asyncio.get_running_loop()
        end = None if timeout is None else loop.time() + timeout
        async with self._turn:
            while not self._buf:
                if self._closed:
                    return _NOTHING
                self._ready.clear()
                self._buf.extend(await self._c._run(self._drain, sync))
                if self._buf or self._ended(sync):
                    break
                left = None if end is None else end - loop.time()
                if left is not None and left <= 0:
                    return _NOTHING
                try:
                    async with asyncio.timeout(left):
                        await self._ready.wait()
                except TimeoutError:
                    return _NOTHING
            return self._buf.popleft() if self._buf else _NOTHING

    async def close(self) -> None:
        """Ends the stream (and its subscription)."""
        if self._closed:
            return
        self._closed = True
        self._ready.set()
        if not self._opening.done():
            self._opening.cancel()  # closes the subscription once it is open
            return
        if self._sync is None:
            return
        if self._c.sync.closed:
            self._close_sync(self._sync)  # its connection is closed: nothing to wait for
        else:
            await self._c._run(self._close_sync, self._sync)

    def __aiter__(self):
        return self._iterate()

    async def _iterate(self):
        try:
            while True:
                item = await self._next(None)
                if item is _NOTHING:
                    return
                yield item
        finally:
            await self.close()

    async def __anext__(self):
        item = await self._next(None)
        if item is _NOTHING:
            raise StopAsyncIteration
        return item

    async def __aenter__(self):
        await self._opened()
        return self

    async def __aexit__(self, *exc):
        await self.close()


class Watch(_Stream):
    """Events of a watch (see warden.Watch): ``async for ev in client.watch(path)``."""

    async def get(self, timeout: float | None = None):
        """The next event, or None when timeout (seconds) passes first or the watch has ended."""
        item = await self._next(timeout)
        return None if item is _NOTHING else item

    @property
    def position(self) -> dict[int, int]:
        return self._sync.position if self._sync is not None else {}

    @property
    def revision(self) -> int:
        return self._sync.revision if self._sync is not None else 0


class RevokeRequests(_Stream):
    """Requests to give a hold back (see warden.RevokeRequests), as an async iterator."""

    get = Watch.get

    @staticmethod
    def _watch_of(sync: _revoke.RevokeRequests) -> _watch.Watch:
        return sync._watch

    def _ended(self, sync) -> bool:
        return sync.ended

    @property
    def ended(self) -> bool:
        return self._closed or (self._sync is not None and self._sync.ended)


class Observer(_Stream):
    """Leaders of an election (None: no leader), the current one first, then
    each change: ``async for leader in client.observe(path)``."""

    @staticmethod
    def _watch_of(sync: _election.Observer) -> _watch.Watch:
        return sync._watch

    def _ended(self, sync) -> bool:
        return sync._watch._closed.is_set()

    def _drain(self, sync: _election.Observer) -> list:
        out = []
        if sync._last is _election._DEFAULT:
            out.append(sync._read()[1])
        for ev in super()._drain(sync._watch):
            changed, cur = sync._on(ev)
            if changed:
                out.append(cur)
        return out
