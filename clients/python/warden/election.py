"""Elections: campaign with a session, observe the leader with a watch."""

from __future__ import annotations

import threading

from . import wire
from .client import Leader
from .errors import HoldLost, NotHolder, SessionExpired, StaleToken
from .locks import _Hold, random_owner
from .wire import Cause, Flag, Kind, Op

_DEFAULT = object()
_LEADER_KINDS = (Kind.LEADER, Kind.RELEASED, Kind.ACQUIRED)  # events that may change the leader


class Election(_Hold):
    """Candidacy of a session in the election at a path.

    :meth:`campaign` returns once elected, with the leadership token (it
    fences like a lock token). ``done`` is set, and ``is_leader`` turns
    False, when the leadership ends (resign, hand-over, the session's loss).
    A leadership the service ends without the leader's doing (an operator's
    hand-over or resign, a revocation, the lease's end) makes ``lost`` a
    :class:`HoldLost` within one keepalive interval (see :class:`Lock`).
    """

    def __init__(self, session, path: str, *, owner: str | None = None, priority: int = 0,
                 revocable: bool = False, signed: bool = False):
        super().__init__(path)
        self.session = session
        self.owner = owner or random_owner()
        self.priority = priority
        self._flags = (Flag.REVOCABLE if revocable else 0) | (Flag.SIGNED if signed else 0)
        self._mu = threading.Lock()

    @property
    def is_leader(self) -> bool:
        return self.token != 0 and not self.done.is_set() and self.session.alive

    held = alive = is_leader

    def campaign(self, value: bytes | str = b"", timeout: float | None = None) -> int:
        """Queues as a candidate with value and returns the leadership token once elected.

        timeout: None waits as long as it takes, 0 only takes a free
        leadership, else at most that many seconds (Timeout)."""
        if isinstance(value, str):
            value = value.encode()
        self.session.check()
        req = self.session._fields(wire.Request(op=Op.CAMPAIGN, path=self.path, owner=self.owner, value=bytes(value),
                                                priority=self.priority, flags=self._flags))
        client = self.session.client
        try:
            resp = client._parked(req, timeout, self._give_back, session=self.session)
        except SessionExpired as e:
            if e.response is not None:
                self.session.lost("the service answered SessionExpired")
            raise
        with self._mu:
            self.token, self.signed = resp.token, resp.signed
            self._begin()
        try:
            self.session._register(self, [(self.path, self.token)])
        except SessionExpired:
            client._give_all_back(req, resp, self._give_back)
            self._end("session ended while campaigning")
            raise
        return self.token

    def _give_back(self, path: str, token: int) -> None:
        self.session.client._call(self._own(wire.Request(op=Op.RESIGN, path=path, token=token)), mutate=True)

    def _own(self, req):
        """req naming this candidate's lease and owner: the service then knows
        the leader ended its own leadership, which is no notice (§4.12)."""
        req.lease, req.owner = self.session.lease, self.owner
        return req

    def proclaim(self, value: bytes | str) -> None:
        """Changes the leader's value (only the leader, by its token)."""
        if isinstance(value, str):
            value = value.encode()
        req = self._own(wire.Request(op=Op.PROCLAIM, path=self.path, token=self._held_token(), value=bytes(value)))
        self._checked(req)

    def resign(self) -> None:
        """Steps down; the next candidate is elected."""
        req = self._own(wire.Request(op=Op.RESIGN, path=self.path, token=self._held_token()))
        self._checked(req)
        self._end("resigned")

    def handover(self, target: str) -> int:
        """Hands leadership to the waiting candidate whose owner is target, in
        one step with no moment without a leader; returns the new leader's token."""
        req = self._own(wire.Request(op=Op.HANDOVER, path=self.path, token=self._held_token(), target=target))
        resp = self._checked(req)
        self._end("handed over")
        return resp.token

    def leader(self) -> Leader | None:
        return self.session.client.leader(self.path)

    def observe(self, **kw):
        """Leader changes of this election: see :func:`observe`."""
        return observe(self.session.client, self.path, **kw)

    def _held_token(self) -> int:
        if self.lost is not None:
            raise self.lost
        if self.token == 0 or self.done.is_set():
            raise NotHolder(f"not the leader of {self.path}")
        return self.token

    def _checked(self, req):
        try:
            return self.session.client._call(req, mutate=True)
        except (NotHolder, StaleToken) as e:
            self._lose(HoldLost(self.path, req.token, Cause.NONE, detail=e.msg, response=e.response),
                       (self.path, req.token))
            raise self.lost or e from None
        except SessionExpired:
            self.session.lost("the service answered SessionExpired")
            raise

    def _end(self, cause: str) -> None:
        self.session._unregister([(self.path, self.token)])
        super()._end(cause)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *_):
        if self.is_leader:
            self.resign()
        self._lost_in_block(exc_type)


class Observer:
    """An iterator of the leaders of one election (None: no leader), each
    yielded when it changes, the current one first."""

    def __init__(self, client, path: str):
        self.client = client
        self.path = path
        self._watch = client.watch(path)
        self._last: object = _DEFAULT

    def _read(self):
        cur = self.client.leader(self.path)
        key = None if cur is None else (cur.token, cur.value)
        changed = self._last is _DEFAULT or key != self._last
        self._last = key
        return changed, cur

    def __iter__(self):
        return self

    def __next__(self) -> Leader | None:
        if self._last is _DEFAULT:
            return self._read()[1]
        for ev in self._watch:
            changed, cur = self._on(ev)
            if changed:
                return cur
        raise StopIteration

    def _on(self, ev) -> tuple[bool, Leader | None]:
        """(changed, the leader) read again after an event that may change
        the leader; (False, None) after any other event."""
        if ev.kind not in _LEADER_KINDS:
            return False, None
        return self._read()

    def close(self) -> None:
        self._watch.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def observe(client, path: str) -> Observer:
    """Leader changes of the election at path: watch the path and read the
    leader again on every leader or release event (docs/protocol.md §4.4)."""
    return Observer(client, path)
