"""Fixtures: real `warden serve` clusters from the built binary, the Go CLI
as a second client, and a TCP proxy that can freeze a client's traffic."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "clients" / "python"))

import warden  # noqa: E402

WARDEN_BIN = Path(os.environ.get("WARDEN_BIN", ROOT / "bin" / "warden"))


def _ephemeral_start() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(n: int) -> list[int]:
    """n free ports below the kernel's ephemeral range, from a random start:
    a port picked inside that range (bind to port 0) can be taken by any
    outgoing connection's source port before the node binds it."""
    lo, hi = 10000, _ephemeral_start() - 1
    span = hi - lo + 1
    first = random.randrange(span)
    socks = []
    try:
        for i in range(span):
            if len(socks) == n:
                break
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", lo + (first + i) % span))
            except OSError:
                s.close()
                continue
            socks.append(s)
        assert len(socks) == n, f"only {len(socks)} free ports in {lo}-{hi}"
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class Cluster:
    """`warden serve` processes on 127.0.0.1 and how to reach them."""

    def __init__(self, tmp: Path, nodes: int, extra: list[str], cli_flags: list[str]):
        if not WARDEN_BIN.exists():
            pytest.fail(f"{WARDEN_BIN} is missing: run `make build` first (or set WARDEN_BIN)")
        self.tmp = tmp
        ports = free_ports(2 * nodes)
        self.addrs = [f"127.0.0.1:{p}" for p in ports[:nodes]]
        raft = [f"127.0.0.1:{p}" for p in ports[nodes:]]
        members = ",".join(f"{i + 1}={a}" for i, a in enumerate(raft))
        self.endpoints = ",".join(self.addrs)
        self.cli_flags = cli_flags
        self.procs: list[subprocess.Popen] = []
        for i in range(nodes):
            log = open(tmp / f"n{i + 1}.log", "ab")
            self.procs.append(subprocess.Popen(
                [str(WARDEN_BIN), "serve", "--id", str(i + 1), "--data-dir", str(tmp / f"n{i + 1}"),
                 "--listen", self.addrs[i], "--raft", raft[i], "--members", members, *extra],
                stdout=log, stderr=log, start_new_session=True))

    def wait_ready(self, client: warden.Client, nodes: int, timeout: float = 60) -> None:
        end = time.monotonic() + timeout
        while True:
            try:
                st = client.status(timeout=2)
                if len(st.get("nodes", [])) >= nodes and st.get("shards") and all(
                        s.get("leader") for s in st["shards"]):
                    return
            except warden.WardenError:
                pass
            for p in self.procs:
                if p.poll() is not None:
                    pytest.fail(f"warden serve exited with {p.returncode}: {self.logs()}")
            if time.monotonic() > end:
                pytest.fail(f"cluster not ready in {timeout}s: {self.logs()}")
            time.sleep(0.2)

    def logs(self) -> str:
        return "\n".join(f"--- {f.name}\n{f.read_text()[-2000:]}" for f in sorted(self.tmp.glob("*.log")))

    def cli(self, *args: str, **kw) -> subprocess.CompletedProcess:
        """Runs the Go CLI against this cluster and waits for it."""
        kw.setdefault("timeout", 60)
        return subprocess.run([str(WARDEN_BIN), "--endpoints", self.endpoints, *self.cli_flags, *args],
                              capture_output=True, text=True, **kw)

    def cli_start(self, *args: str) -> subprocess.Popen:
        """Starts the Go CLI against this cluster (stdin and stdout piped)."""
        return subprocess.Popen([str(WARDEN_BIN), "--endpoints", self.endpoints, *self.cli_flags, *args],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            p.wait()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    """A 3-node plaintext cluster of `warden serve` processes (4 data shards)."""
    c = Cluster(tmp_path_factory.mktemp("cluster"), 3, ["--plaintext", "--shards", "4"], [])
    try:
        with warden.Client(c.endpoints, direct_routing=False) as probe:
            c.wait_ready(probe, 3)
        yield c
    finally:
        c.stop()


@pytest.fixture
def client(cluster):
    with warden.Client(cluster.endpoints) as c:
        yield c


def read_line(proc: subprocess.Popen, timeout: float = 30) -> str:
    """The next line of proc's stdout (fails the test after timeout)."""
    out: list[str] = []
    t = threading.Thread(target=lambda: out.append(proc.stdout.readline()), daemon=True)
    t.start()
    t.join(timeout)
    if not out:
        proc.kill()
        pytest.fail(f"no output from {proc.args} in {timeout}s: {proc.stderr.read()}")
    return out[0].strip()


def end(proc: subprocess.Popen, timeout: float = 30) -> int:
    """Closes proc's stdin (its command's `read` returns) and waits for it."""
    try:
        proc.stdin.close()
    except OSError:
        pass
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise


class Proxy:
    """A TCP proxy to one address whose traffic can be frozen: while frozen it
    forwards nothing in either direction and connects nothing new, but keeps
    every connection open (a partition the client cannot see)."""

    def __init__(self, target: str):
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self._ls = socket.socket()
        self._ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._ls.bind(("127.0.0.1", 0))
        self._ls.listen(64)
        self.addr = f"127.0.0.1:{self._ls.getsockname()[1]}"
        self._open = threading.Event()
        self._open.set()
        self._closed = False
        self.drop_answers = False  # forward requests, discard what the server sends back
        self._socks: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def freeze(self) -> None:
        self._open.clear()

    def thaw(self) -> None:
        self._open.set()

    def _accept(self) -> None:
        while not self._closed:
            try:
                c, _ = self._ls.accept()
            except OSError:
                return
            self._socks.append(c)
            threading.Thread(target=self._connect, args=(c,), daemon=True).start()

    def _connect(self, c: socket.socket) -> None:
        self._open.wait()
        try:
            u = socket.create_connection(self.target)
        except OSError:
            c.close()
            return
        self._socks.append(u)
        for a, b, answers in ((c, u, False), (u, c, True)):
            threading.Thread(target=self._pump, args=(a, b, answers), daemon=True).start()

    def sever(self) -> None:
        """Closes every connection made so far (new ones are served)."""
        socks, self._socks = self._socks, []
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass

    def _pump(self, a: socket.socket, b: socket.socket, answers: bool) -> None:
        try:
            while True:
                data = a.recv(65536)
                self._open.wait()
                if not data:
                    break
                if answers and self.drop_answers:
                    continue
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self._closed = True
        self._open.set()
        for s in [self._ls, *self._socks]:
            try:
                s.close()
            except OSError:
                pass
