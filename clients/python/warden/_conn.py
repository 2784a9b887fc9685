"""One connection to a Warden node: handshake, pipelined requests, pushes.

A connection has one reader thread. It matches every answer to its pending
request by id, and hands pushed frames (id 0, or an id no longer pending)
to the handler registered for their stream id. Writers serialize on a lock.
TLS goes through an in-memory BIO (ssl.MemoryBIO): the reader and the
writers never use one SSL object at the same time, which OpenSSL does not
allow, and the socket itself carries only ciphertext.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import time
from typing import Callable

from . import wire
from .errors import WardenError, error_for

log = logging.getLogger("warden")

_READ = 256 * 1024


class Broken(Exception):
    """The connection is gone: the requests on it are unanswered."""


class _Plain:
    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.wlock = threading.Lock()

    def send(self, data: bytes) -> None:
        with self.wlock:
            self.sock.sendall(data)

    def recv(self) -> bytes:
        return self.sock.recv(_READ)


class _TLS:
    """TLS over a blocking socket with the SSL object behind a lock.

    Lock order: wlock (orders ciphertext on the socket), then lock (the SSL
    object). Whoever takes ciphertext out of the outgoing BIO sends it
    before releasing wlock, so records leave in the order they were made.
    """

    def __init__(self, sock: socket.socket, ctx: ssl.SSLContext, server_hostname: str):
        self.sock = sock
        self.wlock = threading.Lock()
        self.lock = threading.Lock()
        self.inc = ssl.MemoryBIO()
        self.out = ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.inc, self.out, server_side=False, server_hostname=server_hostname)
        while True:
            try:
                self.obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
                data = sock.recv(_READ)
                if not data:
                    raise Broken("connection closed during the TLS handshake")
                self.inc.write(data)
        self._flush()

    def _flush(self) -> None:
        with self.wlock:
            with self.lock:
                data = self.out.read()
            if data:
                self.sock.sendall(data)

    def send(self, data: bytes) -> None:
        with self.wlock:
            with self.lock:
                self.obj.write(data)
                out = self.out.read()
            self.sock.sendall(out)

    def recv(self) -> bytes:
        while True:
            with self.lock:
                try:
                    return self.obj.read(_READ)
                except ssl.SSLWantReadError:
                    pending = self.out.pending
                except ssl.SSLZeroReturnError:
                    return b""
            if pending:
                self._flush()  # e.g. a key update's answer
            data = self.sock.recv(_READ)
            if not data:
                return b""
            with self.lock:
                self.inc.write(data)


_completing = threading.Lock()  # makes a call's first completion its only one


class Call:
    """One pending request: the caller waits, the reader thread completes it
    (or another thread ends the wait early with an error: the first wins)."""

    __slots__ = ("_done", "resp", "err", "_completed")

    def __init__(self):
        self._done = threading.Lock()
        self._done.acquire()
        self.resp = None
        self.err = None
        self._completed = False

    def complete(self, resp=None, err=None) -> None:
        with _completing:
            if self._completed:
                return
            self._completed = True
        self.resp, self.err = resp, err
        self._done.release()

    def wait(self, timeout: float | None):
        """The answer, or None when timeout passes first; raises Broken."""
        if not self._done.acquire(timeout=-1 if timeout is None else max(timeout, 0)):
            return None
        self._done.release()  # a second wait returns at once
        if self.err is not None:
            raise self.err
        return self.resp


class Connection:
    """A handshaken connection with a reader thread."""

    def __init__(self, addr: str, *, client_id: int, token: str = "", tls: ssl.SSLContext | None = None,
                 connect_timeout: float = 5.0, max_frame: int = wire.DEFAULT_MAX_FRAME,
                 on_notices: Callable[[list], None] | None = None):
        self.addr = addr
        self.max_frame = max_frame
        self._lock = threading.Lock()
        self._pending: dict[int, Call] = {}
        self._streams: dict[int, Callable[[object], None]] = {}
        self._next_id = 1
        self._closed = False
        self.broken_reason = ""
        host, _, port = addr.rpartition(":")
        host = host.strip("[]")
        deadline = time.monotonic() + connect_timeout
        try:
            sock = socket.create_connection((host, int(port)), timeout=connect_timeout)
        except OSError as e:
            raise Broken(f"dial {addr}: {e}") from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(max(deadline - time.monotonic(), 0.01))
            self._io = _TLS(sock, tls, host) if tls is not None else _Plain(sock)
            self._reader = wire.FrameReader(max_frame)
            self.hello = self._handshake(token, client_id)
            sock.settimeout(None)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        except WardenError:  # the service's answer (some codes are OSError subclasses too)
            sock.close()
            raise
        except ssl.SSLError as e:
            sock.close()
            raise error_for(wire.Code.UNAUTHORIZED, f"TLS handshake with {addr}: {e}") from None
        except (OSError, wire.DecodeError) as e:
            sock.close()
            raise Broken(f"handshake with {addr}: {e}") from None
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        self._thread = threading.Thread(target=self._read_loop, name=f"warden-conn-{addr}", daemon=True)
        self._thread.start()
        if on_notices is not None:
            self._open_holds(on_notices)

    def _open_holds(self, on_notices: Callable[[list], None]) -> None:
        """Opens the connection's hold stream (op holds) before any other
        request, so that every keepalive this connection carries registers its
        lease on it (docs/protocol.md §4.12). on_notices gets each push's
        events on the reader thread. A server that refuses the op pushes
        nothing; the keepalive answers still carry the notices."""
        def push(resp) -> None:
            if resp is not None and resp.code == wire.Code.OK and resp.events:
                on_notices(resp.events)
        try:
            self.send(wire.Request(op=wire.Op.HOLDS), stream=push)
        except Broken:
            pass  # the next request finds the connection closed

    def _handshake(self, token: str, client_id: int):
        hello = wire.Request(id=self._take_id(), op=wire.Op.HELLO, rev=wire.PROTOCOL_VERSION, auth=token,
                             client=client_id)
        self._io.send(wire.frame(wire.encode(hello), self.max_frame))
        while True:
            data = self._io.recv()
            if not data:
                raise Broken(f"{self.addr} closed the connection during the handshake")
            bodies = self._reader.feed(data)
            if bodies:
                break
        resp = wire.decode_response(bodies[0])
        if resp.code != wire.Code.OK:
            raise error_for(resp.code, resp.msg or f"handshake with {self.addr}", resp)
        if len(bodies) > 1:
            raise Broken(f"{self.addr} sent frames before the handshake answer was read")
        return resp

    def _take_id(self) -> int:
        i = self._next_id
        self._next_id = i + 1 if i < (1 << 64) - 1 else 1
        return i

    @property
    def closed(self) -> bool:
        return self._closed

    def send(self, req, *, stream: Callable[[object], None] | None = None) -> Call:
        """Sends req under a fresh id (set in req.id) and returns its pending call.

        With stream, pushes for stream id req.id go to it until unregistered.
        """
        call = Call()
        with self._lock:
            if self._closed:
                raise Broken(self.broken_reason or "connection closed")
            req.id = self._take_id()
            self._pending[req.id] = call
            if stream is not None:
                self._streams[req.id] = stream
        try:
            data = wire.frame(wire.encode(req), self.max_frame)
        except wire.DecodeError as e:
            self.forget(req.id)
            raise error_for(wire.Code.TOO_LARGE, str(e)) from None
        try:
            self._io.send(data)
        except OSError as e:
            self._break(f"write to {self.addr}: {e}")
        return call

    def forget(self, req_id: int) -> None:
        """Stops waiting for req_id: a late answer is dropped."""
        with self._lock:
            self._pending.pop(req_id, None)

    def unregister_stream(self, stream_id: int) -> None:
        with self._lock:
            self._streams.pop(stream_id, None)

    def _read_loop(self) -> None:
        reason = ""
        try:
            while True:
                data = self._io.recv()
                if not data:
                    reason = f"{self.addr} closed the connection"
                    break
                for body in self._reader.feed(data):
                    self._dispatch(wire.decode_response(body))
        except (OSError, ValueError, ssl.SSLError) as e:
            reason = f"read from {self.addr}: {e}"
        except Exception as e:  # a bug must not leave callers waiting forever
            log.exception("warden: connection reader")
            reason = f"read from {self.addr}: {e!r}"
        self._break(reason)

    def _dispatch(self, resp) -> None:
        handler = None
        with self._lock:
            call = None
            if resp.id:
                if resp.code == wire.Code.QUEUED:
                    return  # interim: the final answer follows under the same id
                call = self._pending.pop(resp.id, None)
            if call is None and resp.stream:
                handler = self._streams.get(resp.stream)
        if call is not None:
            call.complete(resp)
        elif handler is not None:
            handler(resp)
        elif resp.code != wire.Code.OK and not resp.id:
            log.warning("warden: %s: unmatched answer %s: %s", self.addr,
                        wire.CODE_NAMES.get(resp.code, resp.code), resp.msg)

    def _break(self, reason: str) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self.broken_reason = reason
            pending, self._pending = self._pending, {}
            streams, self._streams = self._streams, {}
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        err = Broken(reason)
        for call in pending.values():
            call.complete(err=err)
        for handler in streams.values():
            handler(None)  # the stream ended with its connection

    def close(self) -> None:
        self._break("connection closed by the client")
        try:
            self._sock.close()
        except OSError:
            pass
