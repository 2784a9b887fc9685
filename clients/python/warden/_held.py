"""Holds waiting to hear that the service ended them: a session's, and the
client's locks without a session (docs/protocol.md §4.12)."""

from __future__ import annotations

import logging

from . import wire
from .errors import HoldLost

log = logging.getLogger("warden")

_PENDING_NOTICES = 64  # notices kept for grants still on their way


class Held:
    """Holds by (path, token), each told by the notice that ends it. A notice
    that finds no hold is kept (the newest 64): it may have overtaken its
    grant, and tokens never repeat on a path. The owner serialises calls."""

    def __init__(self):
        self.holds: dict[tuple[str, int], object] = {}
        self._pending: list[wire.Event] = []

    def take(self, ev: wire.Event):
        """The hold ev ends, taken out; None (ev kept) when there is none."""
        hold = self.holds.pop((ev.path, ev.token), None)
        if hold is None and not any(p.path == ev.path and p.token == ev.token for p in self._pending):
            self._pending.append(ev)
            del self._pending[:-_PENDING_NOTICES]
        return hold

    def add(self, hold, keys) -> list[wire.Event]:
        """Registers hold under keys; returns the kept notices that already
        ended it (taken out with their keys)."""
        for k in keys:
            self.holds[k] = hold
        missed = [ev for ev in self._pending if self.holds.get((ev.path, ev.token)) is hold]
        for ev in missed:
            self._pending.remove(ev)
            self.holds.pop((ev.path, ev.token), None)
        return missed

    def remove(self, keys) -> None:
        for k in keys:
            self.holds.pop(k, None)

    def clear(self) -> list:
        """Every hold, once, taken out."""
        holds = list({id(h): h for h in self.holds.values()}.values())
        self.holds = {}
        return holds


def tell(hold, ev: wire.Event) -> None:
    """Tells hold that the service ended it as ev says."""
    log.warning("warden: hold lost: %s token %d: %s", ev.path, ev.token, ev.cause_name)
    hold._lose(HoldLost(ev.path, ev.token, ev.cause, client=ev.client, response=None), (ev.path, ev.token))
