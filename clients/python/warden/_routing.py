"""The client's copy of the route table: which node leads the shard of a path.

Direct routing (docs/protocol.md §3.3) saves the forwarding hop: a path's
namespace hashes to a route key, the range holding that key names a shard,
and the table (or a hint in a later answer) names the node leading it. Any
node answers correctly, so a stale table costs a hop, never a wrong answer.
"""

from __future__ import annotations

import bisect
import threading

from . import wire


class Routes:
    def __init__(self):
        self._lock = threading.Lock()
        self._depth = 0
        self._starts: list[bytes] = []
        self._ranges: list[wire.Range] = []
        self._leaders: dict[int, str] = {}
        self.gen = 0
        self.loaded = False

    def load(self, table: wire.RouteTable) -> None:
        ranges = sorted(table.ranges, key=lambda r: r.start)
        with self._lock:
            self.gen = table.gen
            self._depth = table.depth
            self._ranges = ranges
            self._starts = [r.start for r in ranges]
            self._leaders = {sl.shard: sl.addr for sl in table.leaders if sl.addr}
            self.loaded = True

    def range_of(self, path: str) -> wire.Range | None:
        """The range serving path, or None when path spans ranges or no table is loaded."""
        with self._lock:
            ns = wire.namespace(path, self._depth)
            if ns is None or not self._ranges:
                return None
            key = wire.route_key(ns)
            i = bisect.bisect_right(self._starts, key) - 1
            if i < 0:
                return None
            r = self._ranges[i]
            if r.end and key >= r.end:
                return None
            return r

    def shard_of(self, path: str) -> int:
        r = self.range_of(path)
        return r.shard if r is not None else 0

    def leader(self, shard: int) -> str:
        with self._lock:
            return self._leaders.get(shard, "")

    def note_hint(self, shard: int, hint: wire.Hint | None) -> None:
        """Takes a hint's leader for its shard (or forgets shard's leader without one)."""
        with self._lock:
            if hint is not None and hint.shard and hint.leader:
                self._leaders[hint.shard] = hint.leader
            elif shard:
                self._leaders.pop(shard, None)

    def forget_leader(self, shard: int) -> None:
        with self._lock:
            self._leaders.pop(shard, None)
