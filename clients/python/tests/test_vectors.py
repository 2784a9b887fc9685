"""The language-neutral wire vectors (wire/testdata/vectors) against this codec.

The Go tests read the same files (wire/vectors_test.go), so the two
implementations cannot drift: every vector's frame decodes to its fields,
and every vector not marked decode_only encodes to its frame byte for byte.
"""

import json
import re
from pathlib import Path

import pytest

from warden import wire

VECTORS = Path(__file__).resolve().parents[3] / "wire" / "testdata" / "vectors"


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", name).lower()


def _load(name):
    return json.loads((VECTORS / name).read_text())


def _from_json(cls, fields: dict, record: bool):
    """A message or record of cls from the vectors' JSON form."""
    obj = cls()
    spec = {name: kind for name, kind in cls._wire} if record else {name: kind for _, name, kind in cls._wire}
    for doc_name, raw in fields.items():
        name = _snake(doc_name)
        assert name in spec, f"{cls.__name__} has no field {doc_name}"
        setattr(obj, name, _value(spec[name], raw))
    return obj


def _value(kind, raw):
    if kind == "bin":
        return None if raw is None else bytes.fromhex(raw)
    if kind == "key":
        return bytes.fromhex(raw)
    if isinstance(kind, tuple):
        return [_value(kind[1], x) for x in raw]
    if kind is wire.Hint:
        return wire.Hint(shard=raw["Shard"], gen=raw["Gen"], leader=raw["Leader"])
    if isinstance(kind, type):
        return _from_json(kind, raw, record=True)
    return raw


def _cases(file, cls):
    return [pytest.param(cls, v, id=v["name"]) for v in _load(file)["vectors"]]


@pytest.mark.parametrize("cls,vector", _cases("requests.json", wire.Request) + _cases("responses.json", wire.Response))
def test_vector(cls, vector):
    frame = bytes.fromhex(vector["frame"])
    bodies = wire.FrameReader().feed(frame)
    assert len(bodies) == 1
    want = _from_json(cls, vector["fields"], record=False)
    got = wire.decode_into(cls, bodies[0])
    assert got == want
    if not vector.get("decode_only"):
        assert wire.frame(wire.encode(want)).hex() == vector["frame"]


def test_frames_split_anywhere():
    """Frames arrive in arbitrary pieces; the reader gives whole bodies in order."""
    frames = [bytes.fromhex(v["frame"]) for v in _load("responses.json")["vectors"]]
    stream = b"".join(frames)
    for step in (1, 3, 7, 4096):
        r = wire.FrameReader()
        got = []
        for i in range(0, len(stream), step):
            got += r.feed(stream[i:i + step])
        assert got == [f[4:] for f in frames]


def test_oversized_frame_refused_before_buffering():
    r = wire.FrameReader(max_frame=16)
    with pytest.raises(wire.DecodeError):
        r.feed((17).to_bytes(4, "big"))


def test_derived_values():
    d = _load("derived.json")
    for v in d["lease_ids"]:
        assert wire.lease_id(v["key"]) == v["id"], v
    for v in d["route_keys"]:
        assert wire.route_key(v["namespace"]).hex() == v["key_hex"], v
    for v in d["namespaces"]:
        ns = wire.namespace(v["path"], v["depth"])
        assert (ns is None) == v["spans_all"], v
        if ns is not None:
            assert ns == v["namespace"], v
    for v in d["signed_messages"]:
        msg = wire.signed_message(v["path"], v["token"], v["shard"], v["expiry"], v["mode"], v["permits"])
        assert msg.hex() == v["message_hex"], v
    for v in d["owned_clients"]:
        assert wire.owned_client(v["identity"], v["client"]) == v["owned"], v
