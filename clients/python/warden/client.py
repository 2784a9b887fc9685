"""Client: connections, routing, retries and the calls that need no session."""

from __future__ import annotations

import contextvars
import heapq
import itertools
import json
import logging
import math
import random
import secrets
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Iterable

from . import wire
from ._conn import Broken, Connection
from ._routing import Routes
from ._held import Held, tell
from .errors import (Ambiguous, SessionExpired, Timeout, TooMany, Unavailable, WardenError, error_for,
                     is_retryable)
from .wire import Code, Flag, Op

log = logging.getLogger("warden")

BACKOFF_BASE = 0.010  # seconds; full jitter, as docs/protocol.md §5 recommends
BACKOFF_CAP = 2.0
ROUTE_REFRESH = 2.0  # seconds between route table reads


def backoff(attempt: int) -> float:
    """Full jitter: random(0, min(cap, base * 2**attempt))."""
    return random.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * (2 ** min(attempt, 30))))


def tls_context(ca: str | None = None, cert: str | None = None, key: str | None = None) -> ssl.SSLContext:
    """A TLS 1.3 context that verifies nodes with ca (None: the system's roots)
    and presents cert/key as the client certificate when given."""
    ctx = ssl.create_default_context(cafile=ca)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx


class _Seqs:
    """Sequence numbers of one client id and the floor of the unfinished ones.

    AckSeq tells the service that every Seq below it is finished, so it may
    forget their outcomes. The floor is the lowest Seq still in flight
    (a request being retried, or a wait that may re-attach), so a request's
    own AckSeq never passes its own Seq or one that may still be retried.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._next = 1
        self._live: set[int] = set()
        self._heap: list[int] = []

    def take(self) -> int:
        with self._lock:
            s = self._next
            self._next += 1
            self._live.add(s)
            heapq.heappush(self._heap, s)
            return s

    def done(self, seq: int) -> None:
        with self._lock:
            self._live.discard(seq)
            while self._heap and self._heap[0] not in self._live:
                heapq.heappop(self._heap)

    def floor(self) -> int:
        with self._lock:
            return self._heap[0] if self._heap else self._next


class _Slot:
    """One connection, redialled on demand, moving through addrs on each dial."""

    def __init__(self, client: "Client", addrs: list[str], start: int):
        self._client = client
        self._addrs = addrs
        self._next = start
        self._lock = threading.Lock()
        self.conn: Connection | None = None

    def get(self, deadline: float) -> Connection:
        c = self.conn
        if c is not None and not c.closed:
            return c
        with self._lock:
            c = self.conn
            if c is not None and not c.closed:
                return c
            addr = self._addrs[self._next % len(self._addrs)]
            self._next += 1
            self.conn = self._client._dial(addr, deadline)
            return self.conn

    def close(self) -> None:
        with self._lock:
            if self.conn is not None:
                self.conn.close()


class _Abort:
    """Ends a parked request's wait from another thread (its session ended,
    or the asyncio task awaiting it was cancelled).

    The waiting call is attached before each wait; fire completes it with the
    reason, which the waiter then raises, and ends a pause between attempts."""

    def __init__(self):
        self._lock = threading.Lock()
        self._call = None
        self.reason: BaseException | None = None
        self.fired = threading.Event()

    def attach(self, call) -> None:
        with self._lock:
            self._call = call
            reason = self.reason
        if reason is not None:
            call.complete(err=reason)

    def fire(self, reason: BaseException) -> None:
        with self._lock:
            if self.reason is not None:
                return
            self.reason = reason
            call = self._call
        self.fired.set()
        if call is not None:
            call.complete(err=reason)


class Interrupted(BaseException):
    """The reason warden.aio fires a call's abort with: its awaiting task was
    cancelled. A BaseException, like KeyboardInterrupt, so that a wait it ends
    is withdrawn the same way."""


# The abort of the call running in this context: warden.aio sets it in the
# worker thread of a call its task may cancel; _parked attaches it.
_interrupt: contextvars.ContextVar[_Abort | None] = contextvars.ContextVar("warden_interrupt", default=None)


def _granted(req, resp):
    """(path, token) of every hold an acquire's answer, or its cancel's, reports."""
    out = [(req.path, resp.token)] if resp.token else []
    out += [(h.path, h.token) for h in resp.holders if h.token]
    return out


@dataclass(frozen=True)
class KV:
    """A key-value entry. lease is non-zero for an ephemeral key."""

    key: str
    value: bytes
    version: int
    lease: int = 0
    create_rev: int = 0
    mod_rev: int = 0


@dataclass(frozen=True)
class LockInfo:
    """Holders and waiters (queue order) of one path."""

    path: str
    holders: list
    waiters: list
    permits: int = 0
    delay_until: int = 0  # Unix ms until which the path is in lock-delay
    revoke_at: int = 0  # earliest pending revocation deadline, Unix ms
    rev: int = 0


@dataclass(frozen=True)
class Leader:
    """An election's leader."""

    path: str
    value: bytes
    token: int
    lease: int
    owner: str
    rev: int = 0


class Client:
    """A connection pool to a Warden cluster.

    ``Client(["10.0.0.1:7070", "10.0.0.2:7070"], tls=tls_context(ca), token=...)``.
    Every call is thread-safe and takes a ``timeout`` in seconds (default:
    the client's). Requests are pipelined over ``pool_size`` connections;
    with direct routing (the default) requests on a path go straight to the
    node leading its shard. Mutating requests carry the client's id and a
    sequence number and are retried with the same number, so a retry never
    applies twice (docs/protocol.md §5).
    """

    def __init__(self, endpoints: str | Iterable[str], *, tls: ssl.SSLContext | bool | None = None,
                 token: str | None = None, timeout: float = 10.0, pool_size: int = 2,
                 direct_routing: bool = True, connect_timeout: float = 5.0, attempt_timeout: float = 5.0,
                 max_frame: int = wire.DEFAULT_MAX_FRAME):
        if isinstance(endpoints, str):
            endpoints = endpoints.split(",")
        self.endpoints = [e.strip() for e in endpoints if e.strip()]
        if not self.endpoints:
            raise ValueError("warden: no endpoints")
        if tls is True:
            tls = tls_context()
        self._tls = tls or None
        self._token = token or ""
        self.timeout = timeout
        self._connect_timeout = connect_timeout
        self._attempt_timeout = attempt_timeout
        self._max_frame = max_frame
        self.id = 0
        while self.id == 0:
            self.id = secrets.randbits(64)
        self._seqs = _Seqs()
        start = random.randrange(len(self.endpoints))
        self._slots = [_Slot(self, self.endpoints, start + i) for i in range(max(pool_size, 1))]
        self._rr = itertools.count()
        self._direct: dict[str, _Slot] = {}
        self._direct_lock = threading.Lock()
        self._closed = threading.Event()
        self._routes = Routes() if direct_routing else None
        self._refresh_now = threading.Event()
        self._sessions: dict[int, object] = {}  # lease id -> Session, for the hold notices
        self._singles = Held()  # locks without a session (LockLease), for their notices
        self._singles_lock = threading.Lock()
        self._refresher = None
        if self._routes is not None:
            self._refresher = threading.Thread(target=self._refresh_loop, name="warden-routes", daemon=True)
            self._refresher.start()

    # --- lifecycle -----------------------------------------------------------

    def close(self) -> None:
        """Closes every connection. Sessions of this client stop keeping alive."""
        self._closed.set()
        self._refresh_now.set()
        for s in self._slots:
            s.close()
        with self._direct_lock:
            for s in self._direct.values():
                s.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    # --- connections and routing ---------------------------------------------

    def _dial(self, addr: str, deadline: float) -> Connection:
        if self.closed:
            raise error_for(Code.CLOSED, "client closed")
        budget = min(self._connect_timeout, max(deadline - time.monotonic(), 0.05))
        try:
            return Connection(addr, client_id=self.id, token=self._token, tls=self._tls,
                              connect_timeout=budget, max_frame=self._max_frame, on_notices=self._noticed)
        except WardenError as e:
            if e.code in (Code.UNAUTHORIZED, Code.INVALID_ARGUMENT):
                raise  # credentials or version: no other node will say otherwise
            raise Broken(f"handshake with {addr}: {e}") from None

    def _direct_slot(self, addr: str) -> _Slot:
        with self._direct_lock:
            s = self._direct.get(addr)
            if s is None:
                s = self._direct[addr] = _Slot(self, [addr], 0)
            return s

    def _conn_for(self, path: str, deadline: float) -> tuple[Connection, int]:
        shard = 0
        r = self._routes
        if r is not None and path and r.loaded:
            shard = r.shard_of(path)
            addr = r.leader(shard) if shard else ""
            if addr:
                try:
                    return self._direct_slot(addr).get(deadline), shard
                except Broken:
                    r.forget_leader(shard)
        slot = self._slots[next(self._rr) % len(self._slots)]
        return slot.get(deadline), shard

    def _note_answer(self, resp, shard: int) -> None:
        r = self._routes
        if r is None:
            return
        if resp.code in (Code.NOT_LEADER, Code.WRONG_SHARD):
            r.note_hint(shard, resp.hint)
            self._refresh_now.set()
        elif resp.hint is not None and resp.hint.leader and resp.hint.shard:
            if r.leader(resp.hint.shard) != resp.hint.leader:
                r.note_hint(resp.hint.shard, resp.hint)

    def _refresh_loop(self) -> None:
        while not self.closed:
            try:
                resp = self._call(wire.Request(op=Op.RANGES), timeout=self._attempt_timeout)
                if resp.table is not None:
                    self._routes.load(resp.table)
            except WardenError as e:
                log.debug("warden: route table: %s", e)
            except Exception:
                log.exception("warden: route table")
            self._refresh_now.wait(ROUTE_REFRESH)
            self._refresh_now.clear()

    # --- hold notices -------------------------------------------------------------

    def _noticed(self, events) -> None:
        """Acts on notices of ended holds (pushed on a connection's hold stream,
        or carried by a keepalive answer): the hold's session is told. Runs on
        a reader or keepalive thread and never blocks. The service sends only
        notices, and may hide the Client of another identity's request, so
        only the kind and the cause are checked here (docs/protocol.md §4.12)."""
        for ev in events:
            if ev.kind not in (wire.Kind.RELEASED, wire.Kind.LEASE_ENDED) or ev.cause == wire.Cause.MOVED:
                continue
            if wire.single_lease(ev.lease):
                if ev.kind == wire.Kind.RELEASED:  # the one hold of the lease: its end is the notice
                    self._single_noticed(ev)
                continue
            s = self._sessions.get(ev.lease)
            if s is not None:
                s._noticed(ev)

    def _single_noticed(self, ev) -> None:
        """A notice of a lock without a session: its LockLease is told."""
        with self._singles_lock:
            ll = self._singles.take(ev)
        if ll is not None:
            tell(ll, ev)

    def _hold_single(self, ll) -> None:
        """Registers a LockLease for its notices (one that overtook the grant
        is told at once)."""
        with self._singles_lock:
            missed = self._singles.add(ll, [(ll.path, ll.token)])
        for ev in missed:
            tell(ll, ev)

    def _drop_single(self, key) -> None:
        with self._singles_lock:
            self._singles.remove([key])

    # --- requests ---------------------------------------------------------------

    def _call(self, req, *, timeout: float | None = None, deadline: float | None = None, mutate: bool = False,
              parked: bool = False, keep_seq: bool = False, abort: _Abort | None = None):
        """Sends req until it has a final answer and returns it (code OK).

        Retries on retryable codes, broken connections and missing answers,
        with the same Seq, until the deadline; then raises Ambiguous when a
        mutating request may have reached the service, else the last error.
        A parked session-less wait is withdrawn by the service with its
        connection, so after a broken connection it is sent again with a new
        Seq and the remaining wait (docs/protocol.md §2.4, §5). abort, when
        fired, ends the wait with its reason.
        """
        if deadline is None:
            deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        if mutate:
            req.client = self.id
            if not req.seq:
                req.seq = self._seqs.take()
        wait_end = time.monotonic() + req.wait / 1000 if parked and req.wait > 0 else None
        attempt = 0
        maybe_applied = False
        last: BaseException | None = None
        try:
            while True:
                now = time.monotonic()
                if self.closed:
                    raise error_for(Code.CLOSED, "client closed")
                if abort is not None and abort.reason is not None:
                    raise abort.reason
                if now >= deadline and attempt > 0:
                    raise self._give_up(req, mutate and maybe_applied, last)
                try:
                    conn, shard = self._conn_for(req.path, deadline)
                    if mutate:
                        req.ack_seq = self._seqs.floor()
                    call = conn.send(req)
                    if mutate:
                        maybe_applied = True
                    wait = None if parked and deadline == math.inf else max(deadline - time.monotonic(), 0)
                    if not parked and wait is not None:
                        wait = min(wait, self._attempt_timeout)
                    if abort is not None:
                        abort.attach(call)
                    try:
                        resp = call.wait(wait)
                    except Broken:
                        raise
                    except BaseException:  # ended by an abort or an interrupt: a late answer is dropped
                        conn.forget(req.id)
                        raise
                    if resp is None:
                        conn.forget(req.id)
                        last = Timeout(f"no answer from {conn.addr} within {wait:.1f}s")
                        attempt += 1
                        continue
                except Broken as e:
                    last = e
                    if parked and req.lease == 0 and mutate:
                        # The service withdrew the wait with its connection.
                        self._seqs.done(req.seq)
                        req.seq = self._seqs.take()
                        maybe_applied = False
                        if wait_end is not None:
                            req.wait = max(int((wait_end - time.monotonic()) * 1000), 1)
                    self._sleep(backoff(attempt), deadline, abort)
                    attempt += 1
                    continue
                self._note_answer(resp, shard)
                code = resp.code
                if code == Code.OK:
                    return resp
                err = error_for(code, resp.msg, resp)
                if is_retryable(err) or (code == Code.SUPERSEDED and parked):
                    last = err
                    if code != Code.SUPERSEDED:
                        self._sleep(backoff(attempt), deadline, abort)
                    attempt += 1
                    continue
                if code == Code.TOO_MANY and resp.ttl > 0:
                    pause = resp.ttl / 1000 * (1 + random.random() / 4)
                    if time.monotonic() + pause < deadline:
                        last = err
                        self._sleep(pause, deadline, abort)
                        attempt += 1
                        continue
                maybe_applied = False
                raise err
        finally:
            if mutate and not keep_seq:
                self._seqs.done(req.seq)

    def _give_up(self, req, maybe_applied: bool, last: BaseException | None) -> WardenError:
        name = wire.OP_NAMES.get(req.op, str(req.op))
        if maybe_applied:
            return Ambiguous(f"{name} {req.path}: no answer before the deadline; it may have applied"
                             f" (last: {last})")
        if isinstance(last, WardenError):
            return last
        if isinstance(last, Broken):
            return Unavailable(f"{name} {req.path}: {last}")
        return Timeout(f"{name} {req.path}: {last or 'deadline passed'}")

    @staticmethod
    def _sleep(pause: float, deadline: float, abort: _Abort | None = None) -> None:
        pause = max(min(pause, deadline - time.monotonic()), 0)
        if abort is None:
            time.sleep(pause)
        else:
            abort.fired.wait(pause)  # the loop's next turn raises the reason

    def _parked(self, req, timeout: float | None, give_back, session=None) -> object:
        """Sends an acquire, campaign or acquire.multi that may wait in a queue.

        timeout None waits until granted, 0 tries once, else at most timeout
        seconds. give_back(path, token) gives one hold back. A caller that
        gives up (the deadline without an answer, an interrupt, the session's
        end) or whose outcome is unknown (Ambiguous) withdraws the request
        with cancel, whose answer is the request's final fate; a grant it
        reports is given back, so giving up never leaves a hold behind
        (docs/protocol.md §4.1). When the service cannot answer the cancel in
        time (no quorum), the withdrawal goes on in the background and the
        caller gets Ambiguous. With session, a grant counts only while the
        session is alive by the client's clock: one that arrives later is
        given back and SessionExpired raised (§7).
        """
        if timeout is None:
            req.wait, deadline = wire.WAIT_FOREVER, math.inf
        elif timeout <= 0:
            req.wait, deadline = wire.WAIT_NONE, time.monotonic() + self.timeout
        else:
            req.wait = max(int(timeout * 1000), 1)
            deadline = time.monotonic() + timeout + self._attempt_timeout
        parked = req.wait != wire.WAIT_NONE
        req.client = self.id
        req.seq = self._seqs.take()
        wait_end = time.monotonic() + req.wait / 1000 if req.wait > 0 else math.inf
        abort = _interrupt.get()  # a cancellable asyncio caller's: ends the wait like the session's end
        if session is not None and parked:
            abort = abort or _Abort()
            session._waiting(abort)
        owns_seq = True
        try:
            resp = self._call(req, deadline=deadline, mutate=True, parked=parked, keep_seq=True, abort=abort)
        except WardenError as e:
            if e.code == Code.CANCELLED and time.monotonic() >= wait_end:
                raise Timeout(f"{req.path}: not granted within {req.wait} ms", response=e.response) from None
            gave_up = abort is not None and e is abort.reason
            if not gave_up and e.code != Code.AMBIGUOUS:
                raise  # the service decided (or the request was refused before it was sent)
            settled, owns_seq = self._withdraw(req, give_back, session)
            if gave_up:
                raise
            if settled:
                raise Timeout(f"{req.path}: no answer in time; the request was withdrawn, nothing is held",
                              response=e.response) from e
            raise
        except BaseException:
            _, owns_seq = self._withdraw(req, give_back, session)
            raise
        finally:
            if session is not None and parked:
                session._waited(abort)
            if owns_seq:
                self._seqs.done(req.seq)
        if session is not None and not session.alive:
            self._give_all_back(req, resp, give_back)
            raise session._expired("the grant arrived after the session's local deadline")
        return resp

    def _give_all_back(self, req, resp, give_back) -> None:
        for path, token in _granted(req, resp):
            try:
                give_back(path, token)
            except WardenError as e:
                log.warning("warden: giving back %s token %d: %s", path, token, e)

    def _withdraw(self, req, give_back, session=None) -> tuple[bool, bool]:
        """Withdraws the acquire req (cancel with its Client and Seq) and gives
        back what it took. Returns (settled, owns_seq): settled when its fate
        is known now; otherwise a background thread keeps asking, and owns
        the Seq (the caller must not finish it) until the fate is known, or
        until the lease that would hold the grant has ended anyway: the
        session's, once it is lost here (no keepalive renews it any more), or
        a single-lock lease's TTL after the withdrawal began."""
        if self._settle(req, give_back, self.timeout):
            return True, True
        if self.closed:
            return False, True
        log.warning("warden: withdrawing %s %s in the background", wire.OP_NAMES.get(req.op, req.op), req.path)
        lease_end = time.monotonic() + self._attempt_timeout + req.ttl / 1000

        def moot() -> bool:
            if session is not None:
                return session.done.is_set()
            return time.monotonic() > lease_end

        def run() -> None:
            try:
                attempt = 0
                while not self.closed and not self._settle(req, give_back, self._attempt_timeout):
                    if moot():
                        log.warning("warden: %s %s: its lease ends what the withdrawal could not",
                                    wire.OP_NAMES.get(req.op, req.op), req.path)
                        return
                    self._closed.wait(backoff(attempt) + 0.05)
                    attempt += 1
            finally:
                self._seqs.done(req.seq)

        threading.Thread(target=run, name=f"warden-withdraw-{req.seq}", daemon=True).start()
        return False, False

    def _settle(self, req, give_back, timeout: float) -> bool:
        """One withdrawal of req: True once its fate is known and what it
        took is given back; False while the service cannot tell (no answer,
        no quorum, Ambiguous) or a give-back failed (cancel is idempotent: the
        next one answers the same while the hold lasts)."""
        cancel = wire.Request(op=Op.CANCEL, path=req.path, paths=req.paths, lease=req.lease, owner=req.owner,
                              client=req.client, seq=req.seq)
        try:
            resp = self._call(cancel, timeout=timeout)
        except WardenError as e:
            if e.code in (Code.CANCELLED, Code.NOT_FOUND):
                return True  # withdrawn, or nothing by that number: nothing held
            if e.response is not None and e.code != Code.AMBIGUOUS and not is_retryable(e):
                log.warning("warden: the withdrawal of %s was refused: %s", req.path, e)
                return True  # final: asking again learns nothing more
            return False
        for path, token in _granted(req, resp):
            try:
                give_back(path, token)
            except WardenError as e:
                if e.code not in (Code.NOT_HOLDER, Code.STALE_TOKEN, Code.SESSION_EXPIRED):
                    return False
        return True

    # --- sessions and single locks -------------------------------------------------

    def session(self, ttl: float = 10.0):
        """A new session (a lease kept alive in the background every ttl/3).

        Use it as a context manager: leaving the block revokes the lease,
        releasing everything it holds."""
        from .session import Session
        return Session(self, ttl)

    def acquire(self, path: str, ttl: float, *, timeout: float | None = None, shared: bool = False,
                revocable: bool = False, lock_delay: float | None = None, signed: bool = False):
        """Takes path with a lease of its own (a single-lock lease of ttl seconds).

        Returns a :class:`~warden.locks.LockLease` to renew and release;
        timeout as for Lock.acquire (None: wait until granted, 0: try once).
        """
        from .locks import LockLease
        return LockLease._take(self, path, ttl, timeout=timeout, shared=shared, revocable=revocable,
                               lock_delay=lock_delay, signed=signed)

    def release(self, path: str, token: int, *, lease: int = 0, owner: str = "", timeout: float | None = None) -> int:
        """Releases one hold of path by its token; returns the holds left."""
        req = wire.Request(op=Op.RELEASE, path=path, token=token, lease=lease, owner=owner)
        return self._call(req, timeout=timeout, mutate=True).count

    # --- key-value -------------------------------------------------------------------

    def get(self, key: str, *, stale: bool = False, timeout: float | None = None) -> KV | None:
        """The entry at key, or None when there is none."""
        req = wire.Request(op=Op.KV_GET, path=key, flags=Flag.STALE if stale else 0)
        try:
            resp = self._call(req, timeout=timeout)
        except WardenError as e:
            if e.code == Code.NOT_FOUND:
                return None
            raise
        if resp.kvs:
            return _kv(resp.kvs[0])
        return KV(key, resp.value or b"", resp.version, resp.lease)

    def put(self, key: str, value: bytes | str, *, session=None, expect_version: int | None = None,
            timeout: float | None = None) -> int:
        """Writes key and returns its new version.

        With session, the key is ephemeral: it is deleted when the session
        ends. expect_version makes it a compare-and-set (0: the key must not
        exist); a mismatch raises VersionMismatch.
        """
        if isinstance(value, str):
            value = value.encode()
        req = wire.Request(op=Op.KV_PUT, path=key, value=bytes(value))
        if session is not None:
            req.lease, req.ttl, req.lease_key = session.lease, session.ttl_ms, session._key
        if expect_version is not None:
            req.flags |= Flag.HAS_EXPECT
            req.version = expect_version
        return self._call(req, timeout=timeout, mutate=True).version

    def cas(self, key: str, value: bytes | str, version: int, **kw) -> int:
        """Writes key only if its version is version (0: only if it does not exist)."""
        return self.put(key, value, expect_version=version, **kw)

    def delete(self, key: str, *, expect_version: int | None = None, timeout: float | None = None) -> bool:
        """Deletes key; False when there was none."""
        req = wire.Request(op=Op.KV_DELETE, path=key)
        if expect_version is not None:
            req.flags |= Flag.HAS_EXPECT
            req.version = expect_version
        try:
            self._call(req, timeout=timeout, mutate=True)
        except WardenError as e:
            if e.code == Code.NOT_FOUND:
                return False
            raise
        return True

    def list(self, prefix: str, *, limit: int = 0, stale: bool = False, timeout: float | None = None) -> list[KV]:
        """The entries under prefix, in key order."""
        req = wire.Request(op=Op.KV_LIST, path=prefix, limit=limit,
                           flags=Flag.PREFIX | (Flag.STALE if stale else 0))
        return [_kv(e) for e in self._call(req, timeout=timeout).kvs]

    # --- queries ------------------------------------------------------------------------

    def lock_info(self, path: str, *, stale: bool = False, timeout: float | None = None) -> LockInfo:
        req = wire.Request(op=Op.LOCKINFO, path=path, flags=Flag.STALE if stale else 0)
        r = self._call(req, timeout=timeout)
        return LockInfo(path, r.holders, r.waiters, r.permits, r.delay_until, r.revoke_at, r.rev)

    def list_locks(self, prefix: str, *, limit: int = 0, timeout: float | None = None) -> list:
        req = wire.Request(op=Op.LISTLOCKS, path=prefix, limit=limit, flags=Flag.PREFIX)
        return self._call(req, timeout=timeout).holders

    def leader(self, path: str, *, timeout: float | None = None) -> Leader | None:
        """The leader of the election at path, or None when there is none."""
        req = wire.Request(op=Op.LEADER, path=path)
        try:
            r = self._call(req, timeout=timeout)
        except WardenError as e:
            if e.code == Code.NOT_FOUND:
                return None
            raise
        return Leader(path, r.value or b"", r.token, r.lease, r.owner, r.rev)

    def status(self, *, timeout: float | None = None) -> dict:
        """The cluster's status document (nodes, shards, leaders)."""
        r = self._call(wire.Request(op=Op.STATUS), timeout=timeout)
        return json.loads(r.value or b"{}")

    def revoke_lock(self, path: str, *, token: int = 0, grace: float = 0, force: bool = False,
                    timeout: float | None = None) -> int:
        """Asks the holder with token (0: every holder) to release within grace
        seconds; at the deadline the service revokes the hold. Returns the
        number of holders asked."""
        req = wire.Request(op=Op.REVOKELOCK, path=path, token=token, grace=int(grace * 1000),
                           flags=Flag.FORCE if force else 0)
        return self._call(req, timeout=timeout, mutate=True).count

    def revoke_requests(self, path: str, token: int = 0):
        """The service's requests to give back the hold with token on path
        (0: any holder's), as a :class:`~warden.revoke.RevokeRequests`
        iterator: one already pending first, then each new one, until that
        hold is released or the iterator is closed."""
        from .revoke import RevokeRequests
        return RevokeRequests(self, path, token)

    def observe(self, path: str, **kw):
        """Leader changes of the election at path (see Election.observe)."""
        from .election import observe
        return observe(self, path, **kw)

    def watch(self, path: str, *, prefix: bool = False, start_revision: int = 0, prev_kv: bool = False,
              start_position: dict[int, int] | None = None):
        """Events on path (or under it, with prefix) from start_revision (0: from now).

        Returns a :class:`~warden.watch.Watch`: iterate it for events; it
        resumes after broken connections without losing or repeating one. A
        prefix watch follows its subtree on every shard; ``start_position``
        (a previous prefix watch's ``position``) continues after it.
        """
        from .watch import Watch
        return Watch(self, path, prefix=prefix, start_revision=start_revision, prev_kv=prev_kv,
                     start_position=start_position)


def _kv(e) -> KV:
    return KV(e.key, e.value or b"", e.version, e.lease, e.create_rev, e.mod_rev)
