"""Watches: a stream of events for a path or prefix, resumed across reconnects."""

from __future__ import annotations

import queue
import threading
import time

from . import wire
from ._conn import Broken
from .client import backoff
from .errors import Compacted, WardenError, error_for, is_retryable
from .wire import Code, Flag, Op

Event = wire.Event

_CLOSED = object()


class Watch:
    """An iterator of :class:`warden.Event`, each with its ``kind`` and ``cause``.

    ``for ev in client.watch("/locks/billing", prefix=True): ...``. When
    the stream breaks (connection lost, the server dropped a slow reader,
    the range moved) the watch subscribes again from the revision after the
    last event it delivered, and drops events it has already delivered, so
    nothing is lost or repeated while the history is retained; a start
    revision older than the retained history raises :class:`Compacted`.
    ``close()`` (or leaving a ``with`` block) ends it from any thread.

    A prefix watch follows its subtree on every shard. Its :attr:`position`
    (a dict: shard -> the last revision delivered, or where the stream
    started on shards with nothing delivered yet) is where it resumes
    after a break, and where a new watch started with ``start_position``
    continues without losing or repeating an event (protocol.md §4.6).
    """

    def __init__(self, client, path: str, *, prefix: bool = False, start_revision: int = 0, prev_kv: bool = False,
                 start_position: dict[int, int] | None = None):
        if start_position and not prefix:
            raise ValueError("start_position resumes a prefix watch; a single path resumes with start_revision")
        self.client = client
        self.path = path
        self._prefix = prefix
        self._flags = (Flag.PREFIX if prefix else 0) | (Flag.PREV_KV if prev_kv else 0)
        self._q: queue.Queue = queue.Queue()
        self._resume = start_revision  # revision to subscribe from (0: from now)
        # shard -> last revision delivered (or the stream's start there): a
        # prefix watch's position
        self._last: dict[int, int] = dict(start_position or {})
        self._closed = threading.Event()
        self._conn = None
        self._stream = 0
        self._pending: list = []
        self._notify = None  # called after each push is queued (warden.aio wakes its event loop); must not block
        self.revision = 0  # the shard revision the current subscription started at
        self._subscribe(first=True)

    def _subscribe(self, first: bool = False) -> None:
        attempt = 0
        deadline = time.monotonic() + self.client.timeout
        while not self._closed.is_set():
            req = wire.Request(op=Op.WATCH, path=self.path, flags=self._flags, rev=self._resume)
            if self._prefix and self._last:
                # the position; Rev rides along for a server without positions
                req.position = [wire.ShardRev(shard=s, rev=r) for s, r in sorted(self._last.items())]
            try:
                conn, _ = self.client._conn_for(self.path, deadline)
                gen = object()
                call = conn.send(req, stream=lambda resp, gen=gen: self._push((gen, resp)))
                resp = call.wait(self.client._attempt_timeout)
                if resp is None:
                    conn.unregister_stream(req.id)
                    conn.forget(req.id)
                    raise Broken(f"no answer to watch from {conn.addr}")
            except Broken as e:
                if first and time.monotonic() >= deadline:
                    raise error_for(Code.UNAVAILABLE, f"watch {self.path}: {e}") from None
                time.sleep(backoff(attempt))
                attempt += 1
                continue
            if resp.code != Code.OK:
                conn.unregister_stream(req.id)
                err = error_for(resp.code, resp.msg, resp)
                if is_retryable(err) and not (first and time.monotonic() >= deadline):
                    time.sleep(backoff(attempt))
                    attempt += 1
                    continue
                raise err
            self._conn, self._stream, self._gen = conn, req.id, gen
            self.revision = resp.rev
            if not self._resume:
                self._resume = resp.rev + 1
            if self._prefix and not req.position and not req.rev:
                # from now: nothing is replayed, so the stream starts after
                # the answer's position on every shard
                for sr in resp.position:
                    self._last.setdefault(sr.shard, sr.rev)
            return

    def _push(self, item) -> None:
        self._q.put(item)
        notify = self._notify
        if notify is not None:
            notify()

    def _next_batch(self, timeout: float | None):
        """The next events to deliver ([] on timeout); resubscribes as needed."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._closed.is_set():
                raise StopIteration
            wait = None if end is None else max(end - time.monotonic(), 0)
            try:
                item = self._q.get(timeout=wait)
            except queue.Empty:
                return []
            if item is _CLOSED:
                raise StopIteration
            gen, resp = item
            if gen is not self._gen:
                continue  # from a subscription that has ended
            if resp is None:  # the connection broke
                self._resubscribe()
                continue
            if resp.code != Code.OK:
                err = error_for(resp.code, resp.msg, resp)
                self.conn_unregister()
                if isinstance(err, Compacted):
                    self.close()
                    raise err
                if is_retryable(err) or resp.code == Code.TOO_MANY:
                    self._resubscribe()
                    continue
                self.close()
                raise err
            fresh = []
            for ev in resp.events:
                if ev.rev <= self._last.get(ev.shard, 0):
                    continue  # delivered before a resubscription
                self._last[ev.shard] = ev.rev
                fresh.append(ev)
            if fresh:
                return fresh

    def conn_unregister(self) -> None:
        if self._conn is not None:
            self._conn.unregister_stream(self._stream)

    @property
    def position(self) -> dict[int, int]:
        """A prefix watch's position: shard -> the last revision delivered."""
        return dict(self._last)

    def _resubscribe(self) -> None:
        self.conn_unregister()
        if self._last and not self._prefix:
            self._resume = min(self._last.values()) + 1
        self._gen = None
        self._subscribe()

    def get(self, timeout: float | None = None) -> Event | None:
        """The next event, or None when timeout (seconds) passes first."""
        while not self._pending:
            try:
                batch = self._next_batch(timeout)
            except StopIteration:
                return None
            if not batch:
                return None
            self._pending.extend(batch)
        return self._pending.pop(0)

    def __iter__(self):
        return self

    def __next__(self) -> Event:
        while not self._pending:
            self._pending.extend(self._next_batch(None))
        return self._pending.pop(0)

    def close(self) -> None:
        """Ends the watch (unwatch on the server, best effort)."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._push(_CLOSED)
        conn = self._conn
        if conn is not None and not conn.closed:
            conn.unregister_stream(self._stream)
            try:
                call = conn.send(wire.Request(op=Op.UNWATCH, stream=self._stream))
                call.wait(1.0)
            except (Broken, WardenError):
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
