"""Pieces of the client that need no cluster."""

from __future__ import annotations

import json

import pytest

import warden
from warden import wire
from warden._routing import Routes
from warden.client import _Seqs, backoff
from test_vectors import VECTORS, _from_json


def test_ack_floor_never_passes_an_unfinished_seq():
    s = _Seqs()
    a, b, c = s.take(), s.take(), s.take()
    assert (a, b, c) == (1, 2, 3) and s.floor() == 1
    s.done(b)
    assert s.floor() == 1  # a still in flight (a wait that may re-attach)
    s.done(a)
    assert s.floor() == 3
    s.done(c)
    assert s.floor() == 4  # everything finished: the next Seq
    d = s.take()
    assert s.floor() == d


def test_backoff_is_full_jitter_under_the_cap():
    assert all(0 <= backoff(n) <= min(2.0, 0.010 * 2 ** n) for n in range(40) for _ in range(20))


def test_routes_from_the_vector_table():
    vec = next(v for v in json.loads((VECTORS / "responses.json").read_text())["vectors"] if v["name"] == "ranges")
    resp = _from_json(wire.Response, vec["fields"], record=False)
    r = Routes()
    r.load(resp.table)
    for path in ("/locks/billing/x", "/elections/a", "/a/b/c"):
        key = wire.route_key(wire.namespace(path, 2))
        want = 2 if key < bytes.fromhex("4000000000000000") else 3
        assert r.shard_of(path) == want, path
    assert r.shard_of("/locks") == 0  # shallower than the depth: any node
    assert r.leader(2) == "127.0.0.1:7070" and r.leader(3) == ""
    r.note_hint(3, wire.Hint(shard=3, gen=2, leader="127.0.0.1:7071"))
    assert r.leader(3) == "127.0.0.1:7071"
    r.note_hint(3, None)  # NotLeader without a hint: forget the leader
    assert r.leader(3) == ""


def test_every_code_has_its_class():
    for code, name in wire.CODE_NAMES.items():
        if code == wire.Code.OK:
            continue
        err = warden.error_for(code, "m")
        assert err.code == code and type(err) is not warden.WardenError, name
        assert isinstance(err, warden.WardenError)
    unknown = warden.error_for(99, "later")
    assert type(unknown) is warden.WardenError and unknown.code == 99
    assert {c for c in wire.CODE_NAMES if warden.is_retryable(warden.error_for(c))} == {
        wire.Code.NOT_LEADER, wire.Code.WRONG_SHARD, wire.Code.UNAVAILABLE, wire.Code.RANGE_MOVING, wire.Code.CLOSED}


@pytest.mark.parametrize("body", [b"\x91\x01", b"\x81\xa1k\x01", b"\x82\x01", b"\xc1", b"\x81\x08\x05"])
def test_bad_bodies_are_decode_errors(body):
    with pytest.raises(wire.DecodeError):
        wire.decode_response(body)


def test_client_refuses_oversized_frames():
    req = wire.Request(op=wire.Op.KV_PUT, path="/a", value=b"x" * 100)
    with pytest.raises(wire.DecodeError):
        wire.frame(wire.encode(req), max_frame=64)
