"""The Warden wire protocol: frames, request and response messages, records.

Everything here follows docs/protocol.md of the Warden repository: a frame
is a 4-byte big-endian body length and one msgpack value; requests and
responses are msgpack maps from field numbers to values, with only non-zero
fields sent; nested records are arrays in a fixed field order. Decoders skip
unknown field numbers and ignore array elements past the ones they know.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, field, fields
from typing import Any

import msgpack

PROTOCOL_VERSION = 1
DEFAULT_MAX_FRAME = 1 << 20  # bytes of a frame body, both directions

# Wait values of acquire and campaign.
WAIT_NONE = 0
WAIT_FOREVER = -1

EXCLUSIVE = 0
SHARED = 1


class Op:
    """Operation numbers (docs/protocol.md §4)."""

    HELLO = 1
    ACQUIRE = 2
    RELEASE = 3
    RENEW = 4
    KEEPALIVE = 5
    REVOKE = 6
    CANCEL = 7
    LOCKINFO = 8
    LISTLOCKS = 9
    KV_GET = 10
    KV_PUT = 11
    KV_DELETE = 12
    KV_LIST = 13
    CAMPAIGN = 14
    PROCLAIM = 15
    RESIGN = 16
    LEADER = 17
    WATCH = 18
    UNWATCH = 19
    STATUS = 20
    RANGES = 21
    SESSION = 22
    ACQUIRE_MULTI = 23
    REVOKELOCK = 24
    HANDOVER = 25
    HOLDS = 90


class Flag:
    """Request flag bits (docs/protocol.md §3.1)."""

    PREFIX = 1 << 0
    HAS_EXPECT = 1 << 1
    STALE = 1 << 2
    PREV_KV = 1 << 3
    SIGNED = 1 << 4
    PEER = 1 << 5
    REVOCABLE = 1 << 8
    FORCE = 1 << 9
    MOVE_FINAL = 1 << 12
    HOLD_NOTICES = 1 << 20


class Code:
    """Result codes (docs/protocol.md §6)."""

    OK = 0
    NOT_LEADER = 1
    WRONG_SHARD = 2
    CONFLICT = 3
    NOT_HOLDER = 4
    STALE_TOKEN = 5
    SESSION_EXPIRED = 6
    INVALID_ARGUMENT = 7
    TOO_LARGE = 8
    UNAVAILABLE = 9
    TIMEOUT = 10
    UNKNOWN_OP = 11
    MALFORMED = 12
    NOT_FOUND = 13
    VERSION_MISMATCH = 14
    QUEUED = 15
    CANCELLED = 16
    COMPACTED = 17
    RANGE_MOVING = 18
    AMBIGUOUS = 19
    SPANS_RANGES = 20
    SELF_CONFLICT = 21
    UPGRADE_CONFLICT = 22
    TOO_MANY = 23
    UNAUTHORIZED = 24
    INTERNAL = 25
    CLOSED = 26
    DEADLOCK = 30
    LOCK_DELAYED = 31
    RESTORE_REFUSED = 45
    SUPERSEDED = 55
    SEQ_REUSED = 70


class Kind:
    """Event kinds (docs/protocol.md §3.3)."""

    ACQUIRED = 1
    RELEASED = 2
    QUEUED = 3
    DEQUEUED = 4
    KV_PUT = 5
    KV_DELETE = 6
    LEADER = 7
    LEASE_CREATED = 8
    LEASE_ENDED = 9
    FENCE = 10
    RENEWED = 11
    REVOKE_REQUESTED = 30
    DELAY_STARTED = 31
    DELAY_ENDED = 32


class Cause:
    """Event causes (docs/protocol.md §3.3)."""

    NONE = 0
    DIRECT = 1
    HANDOFF = 2
    RELEASED = 3
    EXPIRED = 4
    REVOKED = 5
    CANCELLED = 6
    RESIGNED = 7
    PROCLAIMED = 8
    USER = 9
    MOVED = 10
    FORCED = 30
    HANDOVER = 31
    ADMIN = 32
    WAITER = 33


def _names(cls: type) -> dict[int, str]:
    return {v: k.lower() for k, v in vars(cls).items() if k.isupper()}


KIND_NAMES = _names(Kind)
CAUSE_NAMES = _names(Cause)
CODE_NAMES = _names(Code)
OP_NAMES = _names(Op)


class DecodeError(ValueError):
    """A frame or message that does not follow the protocol."""


# --- nested records -------------------------------------------------------
#
# Records are msgpack arrays with every field present, in this order. A
# field's kind is "uint", "int", "str", "bin", "key" (a msgpack str holding
# raw bytes, exposed as bytes), or a record class / ("list", kind).


def _record(cls):
    """Declares cls a wire record: its dataclass fields, in order, are the array."""
    cls = dataclass(slots=True)(cls)
    cls._wire = tuple((f.name, f.metadata["kind"]) for f in fields(cls))
    return cls


def _f(kind, default=0):
    if kind == "bin":
        return field(default=None, metadata={"kind": kind})
    if kind in ("str",):
        return field(default="", metadata={"kind": kind})
    if kind == "key":
        return field(default=b"", metadata={"kind": kind})
    if isinstance(kind, tuple):
        return field(default_factory=list, metadata={"kind": kind})
    if isinstance(kind, type):
        return field(default=None, metadata={"kind": kind})
    return field(default=default, metadata={"kind": kind})


@_record
class Holder:
    owner: str = _f("str")
    lease: int = _f("uint")
    mode: int = _f("uint")
    token: int = _f("uint")
    count: int = _f("uint")
    path: str = _f("str")
    ttl: int = _f("int")  # ms left on the holder's lease, when the answering node knows it


@_record
class Waiter:
    owner: str = _f("str")
    lease: int = _f("uint")
    mode: int = _f("uint")
    client: int = _f("uint")
    seq: int = _f("uint")
    path: str = _f("str")


@_record
class KV:
    key: str = _f("str")
    value: bytes | None = _f("bin")
    version: int = _f("uint")
    lease: int = _f("uint")
    create_rev: int = _f("uint")
    mod_rev: int = _f("uint")


@_record
class Range:
    start: bytes = _f("key")
    end: bytes = _f("key")
    shard: int = _f("uint")
    gen: int = _f("uint")


@_record
class Event:
    rev: int = _f("uint")
    kind: int = _f("uint")
    cause: int = _f("uint")
    path: str = _f("str")
    mode: int = _f("uint")
    token: int = _f("uint")
    lease: int = _f("uint")
    owner: str = _f("str")
    value: bytes | None = _f("bin")
    version: int = _f("uint")
    client: int = _f("uint")
    seq: int = _f("uint")
    shard: int = _f("uint")
    time: int = _f("int")
    ttl: int = _f("int")

    @property
    def kind_name(self) -> str:
        return KIND_NAMES.get(self.kind, str(self.kind))

    @property
    def cause_name(self) -> str:
        return CAUSE_NAMES.get(self.cause, str(self.cause))


@_record
class Grant:
    client: int = _f("uint")
    seq: int = _f("uint")
    path: str = _f("str")
    token: int = _f("uint")
    lease: int = _f("uint")
    mode: int = _f("uint")


@_record
class ShardLeader:
    shard: int = _f("uint")
    addr: str = _f("str")


@_record
class RouteTable:
    gen: int = _f("uint")
    depth: int = _f("int")
    ranges: list[Range] = _f(("list", Range))
    leaders: list[ShardLeader] = _f(("list", ShardLeader))


@_record
class ShardRev:
    """One shard's revision in a watch position (protocol.md §4.6)."""

    shard: int = _f("uint")
    rev: int = _f("uint")


@_record
class SignedGrant:
    shard: int = _f("uint")
    expiry: int = _f("int")  # unix ms: at the latest the lease's deadline when the grant was answered
    sig: bytes | None = _f("bin")
    mode: int = _f("uint")  # the mode granted (signed)
    permits: int = _f("uint")  # a semaphore's permit count, 0 for a plain lock (signed)


@dataclass(slots=True)
class Hint:
    """A routing hint: a msgpack map with string keys "s", "g", "l"."""

    shard: int = 0
    gen: int = 0
    leader: str = ""


# --- requests and responses -----------------------------------------------
#
# Map keys may come in any order. These tables list the fields in the order
# the Go encoders write them, so that both write the same bytes (the shared
# vectors compare encodings byte for byte).

REQUEST_FIELDS: tuple[tuple[int, str, Any], ...] = (
    (1, "id", "uint"),
    (2, "op", "uint"),
    (3, "path", "str"),
    (4, "mode", "uint"),
    (5, "lease", "uint"),
    (6, "ttl", "int"),
    (7, "wait", "int"),
    (8, "token", "uint"),
    (9, "owner", "str"),
    (10, "value", "bin"),
    (11, "version", "uint"),
    (12, "rev", "uint"),
    (13, "client", "uint"),
    (14, "seq", "uint"),
    (15, "ack_seq", "uint"),
    (16, "gen", "uint"),
    (17, "flags", "uint"),
    (18, "limit", "uint"),
    (19, "stream", "uint"),
    (20, "auth", "str"),
    (21, "leases", ("list", "uint")),
    (22, "ranges", ("list", Range)),
    (23, "shard", "uint"),
    (24, "term", "uint"),
    (65, "remaining", ("list", "int")),
    (80, "chunk", "uint"),
    (81, "to_replica", "uint"),
    (70, "identity", "str"),
    (71, "lease_key", "uint"),
    (30, "paths", ("list", "str")),
    (31, "grace", "int"),
    (32, "target", "str"),
    (33, "permits", "uint"),
    (34, "lock_delay", "int"),
    (35, "priority", "int"),
    (36, "position", ("list", ShardRev)),
    (60, "trace", "str"),
)

RESPONSE_FIELDS: tuple[tuple[int, str, Any], ...] = (
    (1, "id", "uint"),
    (2, "code", "uint"),
    (3, "msg", "str"),
    (4, "token", "uint"),
    (5, "lease", "uint"),
    (6, "ttl", "int"),
    (7, "rev", "uint"),
    (8, "value", "bin"),
    (9, "version", "uint"),
    (10, "mode", "uint"),
    (11, "count", "uint"),
    (12, "owner", "str"),
    (13, "path", "str"),
    (14, "stream", "uint"),
    (15, "hint", Hint),
    (16, "holders", ("list", Holder)),
    (17, "waiters", ("list", Waiter)),
    (18, "kvs", ("list", KV)),
    (19, "events", ("list", Event)),
    (20, "leases", ("list", "uint")),
    (21, "ranges", ("list", Range)),
    (22, "grants", ("list", Grant)),
    (23, "table", RouteTable),
    (24, "signed", SignedGrant),
    (70, "denied", ("list", "uint")),
    (30, "delay_until", "int"),
    (31, "revoke_at", "int"),
    (32, "permits", "uint"),
    (33, "position", ("list", ShardRev)),
)


def _message(cls, table):
    """Makes cls a message dataclass with one attribute per field of table."""
    ann = {}
    ns: dict[str, Any] = {}
    for _, name, kind in table:
        ann[name] = Any
        if isinstance(kind, tuple):
            ns[name] = field(default_factory=list)
        elif kind == "str":
            ns[name] = ""
        elif kind == "bin" or isinstance(kind, type):
            ns[name] = None
        else:
            ns[name] = 0
    ns["__annotations__"] = ann
    ns["__doc__"] = cls.__doc__
    ns["__module__"] = cls.__module__
    new = dataclass(slots=True)(type(cls.__name__, (), ns))
    new._wire = table
    new._by_num = {num: (name, kind) for num, name, kind in table}
    return new


class Request:
    """A request, client to server; attributes are the fields of §3.1."""


class Response:
    """A response or push, server to client; attributes are the fields of §3.2."""


Request = _message(Request, REQUEST_FIELDS)
Response = _message(Response, RESPONSE_FIELDS)


# --- encoding ---------------------------------------------------------------


def _enc(kind, v):
    """The msgpack-ready form of value v of a field of kind."""
    if kind == "key":
        return v.decode("utf-8", "surrogateescape")
    if kind == "bin":
        return None if v is None else bytes(v)
    if isinstance(kind, tuple):
        return [_enc(kind[1], x) for x in v]
    if kind is Hint:
        m = {"s": v.shard, "g": v.gen}
        if v.leader:
            m["l"] = v.leader
        return m
    if isinstance(kind, type):
        return [_enc(k, getattr(v, n)) for n, k in kind._wire]
    return v


def _zero(kind, v) -> bool:
    if kind == "bin":
        return v is None  # an empty value is sent (an empty bin): it is not "no value"
    if isinstance(kind, type):
        return v is None
    return not v


def _pack_map(msg) -> dict:
    m = {}
    for num, name, kind in msg._wire:
        v = getattr(msg, name)
        if not _zero(kind, v):
            m[num] = _enc(kind, v)
    return m


_packer_opts = dict(use_bin_type=True, unicode_errors="surrogateescape")


def encode(msg) -> bytes:
    """The msgpack body of a Request or Response (no frame header)."""
    return msgpack.packb(_pack_map(msg), **_packer_opts)


def encode_record(rec) -> bytes:
    """The msgpack array of one nested record (Holder, Event, ...)."""
    return msgpack.packb(_enc(type(rec), rec), **_packer_opts)


def frame(body: bytes, max_frame: int = DEFAULT_MAX_FRAME) -> bytes:
    """body behind its 4-byte big-endian length."""
    if len(body) > max_frame:
        raise DecodeError(f"frame body of {len(body)} bytes over the {max_frame}-byte limit")
    return struct.pack(">I", len(body)) + body


# --- decoding ---------------------------------------------------------------


def _uint(v):
    if type(v) is not int or v < 0 or v >= 1 << 64:
        raise DecodeError(f"expected an unsigned integer, got {v!r}")
    return v


def _int(v):
    if type(v) is not int or not -(1 << 63) <= v < 1 << 63:
        raise DecodeError(f"expected an integer, got {v!r}")
    return v


def _str(v):
    if type(v) is not str:
        raise DecodeError(f"expected a string, got {type(v).__name__}")
    return v


def _dec(kind, v):
    if kind == "uint":
        return _uint(v)
    if kind == "int":
        return _int(v)
    if kind == "str":
        return _str(v)
    if kind == "key":
        return _str(v).encode("utf-8", "surrogateescape")
    if kind == "bin":
        if v is None or type(v) is bytes:
            return v
        raise DecodeError(f"expected binary, got {type(v).__name__}")
    if isinstance(kind, tuple):
        if v is None:
            return []
        if type(v) is not list:
            raise DecodeError(f"expected an array, got {type(v).__name__}")
        return [_dec(kind[1], x) for x in v]
    if kind is Hint:
        if type(v) is not dict:
            raise DecodeError("hint: expected a map")
        h = Hint()
        for k, x in v.items():
            if k == "s":
                h.shard = _uint(x)
            elif k == "g":
                h.gen = _uint(x)
            elif k == "l":
                h.leader = _str(x)
        return h
    if isinstance(kind, type):
        if type(v) is not list:
            raise DecodeError(f"{kind.__name__}: expected an array")
        rec = kind()
        for (name, k), x in zip(kind._wire, v):  # extra elements are ignored
            setattr(rec, name, _dec(k, x))
        return rec
    raise AssertionError(kind)


def _unpack(body: bytes):
    try:
        return msgpack.unpackb(
            body, raw=False, strict_map_key=False, unicode_errors="surrogateescape")
    except DecodeError:
        raise
    except Exception as e:  # msgpack's own errors: truncated, extra data, bad type byte
        raise DecodeError(f"undecodable body: {e}") from None


def decode_into(cls, body: bytes):
    """Decodes a Request or Response body, skipping unknown field numbers."""
    m = _unpack(body)
    if type(m) is not dict:
        raise DecodeError("a message is a msgpack map")
    msg = cls()
    by_num = cls._by_num
    for k, v in m.items():
        if type(k) is not int:
            raise DecodeError(f"field key {k!r} is not an integer")
        spec = by_num.get(k)
        if spec is None:
            continue
        name, kind = spec
        if v is None and kind not in ("bin",) and not isinstance(kind, (tuple, type)):
            continue  # nil for a scalar: the zero value
        setattr(msg, name, _dec(kind, v))
    return msg


def decode_request(body: bytes):
    return decode_into(Request, body)


def decode_response(body: bytes):
    return decode_into(Response, body)


def decode_record(cls, body: bytes):
    return _dec(cls, _unpack(body))


class FrameReader:
    """Splits a byte stream into frame bodies, refusing oversized frames.

    The length is checked before the body is buffered, so a peer cannot make
    the reader hold more than max_frame bytes plus one read.
    """

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME):
        self.max_frame = max_frame
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        out = []
        buf = self._buf
        pos = 0
        n = len(buf)
        while n - pos >= 4:
            size = int.from_bytes(buf[pos:pos + 4], "big")
            if size > self.max_frame:
                raise DecodeError(f"frame of {size} bytes over the {self.max_frame}-byte limit")
            if n - pos - 4 < size:
                break
            out.append(bytes(buf[pos + 4:pos + 4 + size]))
            pos += 4 + size
        if pos:
            del buf[:pos]
        return out


# --- derived values ---------------------------------------------------------

_LEASE_DOMAIN = b"warden-lease-v1\x00"


def lease_id(key: int) -> int:
    """The session lease id proven by key (0 means: pick another key)."""
    d = hashlib.sha256(_LEASE_DOMAIN + key.to_bytes(8, "big")).digest()
    return int.from_bytes(d[:8], "big") & ~(1 << 63)


def single_lease(lease: int) -> bool:
    """Whether lease is a single-lock lease (the server's, top bit set) rather
    than a session's."""
    return lease >> 63 == 1


_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_M64 = (1 << 64) - 1


def route_key(namespace: str) -> bytes:
    """The 8-byte route key of a namespace: FNV-1a 64 then murmur3's fmix64."""
    h = _FNV_OFFSET
    for b in namespace.encode("utf-8", "surrogateescape"):
        h = ((h ^ b) * _FNV_PRIME) & _M64
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & _M64
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & _M64
    h ^= h >> 33
    return h.to_bytes(8, "big")


def namespace(path: str, depth: int) -> str | None:
    """The first depth segments of path, or None when path is shallower."""
    if depth <= 0:
        return None
    segs = path.split("/")[1:]
    if path == "/" or len(segs) < depth:
        return None
    return "/" + "/".join(segs[:depth])


def signed_message(path: str, token: int, shard: int, expiry: int, mode: int = 0, permits: int = 0) -> bytes:
    """The bytes a signed grant's Ed25519 signature covers (docs/protocol.md §3.3)."""
    return (b"warden-fence-v2\x00" + path.encode() + b"\x00"
            + struct.pack(">QQqBI", token, shard, expiry, mode, permits))


_CLIENT_DOMAIN = b"warden-client-v1\x00"


def owned_client(identity: str, client: int) -> int:
    """The id a server with authentication on knows client id client of
    identity by (docs/protocol.md §5): the Client of the waiters and events
    it shows for this client's requests."""
    d = hashlib.sha256(_CLIENT_DOMAIN + identity.encode() + b"\x00" + client.to_bytes(8, "big")).digest()
    return int.from_bytes(d[:8], "big") or 1
