"""The Python client against a real cluster, with the Go CLI as the other client."""

from __future__ import annotations

import threading
import time

import pytest

import warden
from conftest import Proxy, end, read_line


def _cycles(lines: list[str]) -> list[tuple[str, int]]:
    """(who, token) per critical section; fails on any overlap."""
    out = []
    inside = None
    for line in lines:
        what, who, token = line.split()
        if what == "enter":
            assert inside is None, f"{who} entered while {inside} was inside: {lines}"
            inside = (who, int(token))
        else:
            assert inside == (who, int(token)), f"{who} left a section it was not in: {lines}"
            out.append(inside)
            inside = None
    assert inside is None
    return out


def test_mutual_exclusion_and_fencing_across_python_and_go(cluster, client, tmp_path):
    """Python threads and Go CLI processes take turns on one path: no two
    critical sections overlap, and the fencing tokens they were granted
    strictly increase in the order the sections ran, across both languages."""
    path = "/locks/mixed/job"
    log = tmp_path / "sections.log"
    log.touch()
    rounds = 4

    def python_worker(n: int) -> None:
        with client.session(ttl=10) as s:
            for _ in range(rounds):
                with s.lock(path) as lock:
                    with open(log, "a") as f:
                        f.write(f"enter py{n} {lock.token}\n")
                    time.sleep(0.02)
                    with open(log, "a") as f:
                        f.write(f"exit py{n} {lock.token}\n")

    def go_worker(n: int) -> None:
        for _ in range(rounds):
            section = (f'echo "enter go{n} $WARDEN_LOCK_TOKEN" >> {log}; sleep 0.02; '
                       f'echo "exit go{n} $WARDEN_LOCK_TOKEN" >> {log}')
            r = cluster.cli("lock", path, "--", "sh", "-c", section)
            assert r.returncode == 0, r.stderr

    threads = [threading.Thread(target=python_worker, args=(i,)) for i in range(2)]
    threads += [threading.Thread(target=go_worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    sections = _cycles(log.read_text().split("\n")[:-1])
    assert len(sections) == 4 * rounds
    assert {who[:2] for who, _ in sections} == {"py", "go"}
    tokens = [token for _, token in sections]
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens), tokens


def test_hierarchy_conflicts_with_a_go_holder(cluster, client):
    """A lock held by the Go CLI on /locks/tree/a/b blocks Python on its
    ancestors and descendants, not on siblings; a shared Python hold admits
    a shared Go try and refuses an exclusive one on the ancestor."""
    go = cluster.cli_start("lock", "/locks/tree/a/b", "--", "sh", "-c", 'echo "$WARDEN_LOCK_TOKEN"; read x; true')
    try:
        token = int(read_line(go))
        with client.session(ttl=10) as s:
            for path in ("/locks/tree/a", "/locks/tree/a/b", "/locks/tree/a/b/c"):
                assert not s.lock(path).try_acquire(), path
                assert not s.rlock(path).try_acquire(), path
            with pytest.raises(warden.Conflict):
                s.lock("/locks/tree/a").acquire(timeout=0)
            sibling = s.lock("/locks/tree/a/c")
            assert sibling.try_acquire() and sibling.token > 0
            sibling.release()
            holders = client.lock_info("/locks/tree/a/b").holders
            assert [h.token for h in holders] == [token]

            with s.rlock("/locks/tree/r/shared") as r:
                assert r.held
                assert cluster.cli("lock", "--try", "--shared", "/locks/tree/r/shared", "--", "true").returncode == 0
                assert cluster.cli("lock", "--try", "/locks/tree/r", "--", "true").returncode == 2
            with pytest.raises(warden.SpansRanges):
                s.lock("/locks").acquire(timeout=0)
    finally:
        assert end(go) == 0


def test_reentrancy_and_release_by_token(client):
    with client.session(ttl=10) as s:
        lock = s.lock("/locks/re/x")
        with lock:
            t1 = lock.token
            with lock:
                assert lock.token == t1 and lock.count == 2
            assert lock.held and lock.count == 1
            other = s.lock("/locks/re/x")  # another owner of the same session
            assert not other.try_acquire()
        assert not lock.held and lock.done.is_set()
        with pytest.raises(warden.NotHolder):
            lock.release()
        # A stale token releases nothing.
        with s.lock("/locks/re/x") as again:
            assert again.token > t1
            with pytest.raises((warden.StaleToken, warden.NotHolder)):
                client.release("/locks/re/x", t1)
            assert again.held


def test_session_loss_ends_the_hold_before_go_is_granted(cluster, tmp_path):
    """A Python holder whose traffic is frozen (keepalives unanswered) gives
    the lock up locally before the Go waiter is granted it."""
    proxy = Proxy(cluster.addrs[0])
    try:
        with warden.Client(proxy.addr, direct_routing=False, attempt_timeout=1.0) as c:
            s = c.session(ttl=2)
            lock = s.lock("/locks/loss/x")
            lock.acquire()
            ended_at = []
            threading.Thread(target=lambda: (lock.done.wait(), ended_at.append(time.time())), daemon=True).start()
            go = cluster.cli_start("lock", "/locks/loss/x", "--", "sh", "-c", 'date +%s.%N; echo "$WARDEN_LOCK_TOKEN"')
            proxy.freeze()
            granted_at = float(read_line(go, timeout=60))
            go_token = int(read_line(go))
            assert go.wait(30) == 0
            assert ended_at, "the Python lock's done event was never set"
            assert not lock.held and s.state == warden.LOST and s.done.is_set()
            assert ended_at[0] <= granted_at, (ended_at[0], granted_at)
            deadline_wall = time.time() - time.monotonic() + s.deadline  # final: the session is lost
            assert deadline_wall <= granted_at, (deadline_wall, granted_at)
            assert go_token > lock.token
            with pytest.raises(warden.SessionExpired):
                s.lock("/locks/loss/y").acquire(timeout=0)
    finally:
        proxy.close()


def test_election_across_languages(cluster, client):
    """Python leads, a Go candidate waits; Python resigns and Go leads; an
    observer in Python sees both, and Python leads again after Go steps down
    with a higher token."""
    path = "/elections/mixed"
    with client.session(ttl=10) as s, client.observe(path) as obs:
        assert next(obs) is None
        e = s.election(path)
        t1 = e.campaign("python")
        leader = next(obs)
        assert leader.value == b"python" and leader.token == t1
        go = cluster.cli_start("elect", path, "go-node", "--", "sh", "-c", 'echo "$WARDEN_LOCK_TOKEN"; read x; true')
        try:
            for _ in range(100):  # the Go candidate is queued behind Python
                info = client.lock_info(path)
                if info.waiters:
                    break
                time.sleep(0.05)
            e.resign()
            go_token = int(read_line(go))
            leader = next(obs)
            assert leader.value == b"go-node" and leader.token == go_token > t1
            e2 = s.election(path)
            won = []
            t = threading.Thread(target=lambda: won.append(e2.campaign("python-again")))
            t.start()
        finally:
            assert end(go) == 0
        t.join(30)
        assert won and won[0] > go_token
        assert next(obs).value == b"python-again"
        e2.resign()


def test_watch_sees_a_go_release_with_its_cause(cluster, client):
    with client.watch("/locks/watched", prefix=True) as w:
        r = cluster.cli("lock", "/locks/watched/job", "--", "sh", "-c", 'echo "$WARDEN_LOCK_TOKEN"')
        assert r.returncode == 0, r.stderr
        token = int(r.stdout.strip())
        got = []
        while len(got) < 2:
            ev = w.get(timeout=30)
            assert ev is not None, got
            if ev.token == token and ev.kind in (warden.Kind.ACQUIRED, warden.Kind.RELEASED):
                got.append(ev)
        assert (got[0].kind, got[0].cause) == (warden.Kind.ACQUIRED, warden.Cause.DIRECT)
        assert (got[1].kind, got[1].cause) == (warden.Kind.RELEASED, warden.Cause.RELEASED)
        assert got[1].cause_name == "released" and got[1].path == "/locks/watched/job"
        assert got[0].rev < got[1].rev


def test_watch_resumes_from_a_revision(client):
    """A watch from a start revision replays what happened since; a second
    watch from the first one's last revision + 1 repeats nothing."""
    v1 = client.put("/kv/resume/a", "1")
    first = client.get("/kv/resume/a")
    client.put("/kv/resume/a", "2")
    with client.watch("/kv/resume/a", start_revision=first.mod_rev) as w:
        a, b = w.get(timeout=10), w.get(timeout=10)
    assert (a.kind, a.version, a.value) == (warden.Kind.KV_PUT, v1, b"1")
    assert (b.version, b.value, b.cause) == (2, b"2", warden.Cause.USER)
    client.put("/kv/resume/a", "3")
    with client.watch("/kv/resume/a", start_revision=b.rev + 1) as w:
        c = w.get(timeout=10)
    assert c.value == b"3" and c.rev > b.rev


def _puts_seen(w, paths):
    """Reads w until every path in paths was seen once; fails on a repeat."""
    seen = []
    while len(seen) < len(paths):
        ev = w.get(timeout=30)
        assert ev is not None, ("missing", sorted(set(paths) - set(seen)))
        if ev.kind == warden.Kind.KV_PUT:
            assert ev.path in paths and ev.path not in seen, (ev.path, seen)
            seen.append(ev.path)
    return seen


def test_prefix_watch_spans_shards_and_resumes_from_its_position(client):
    """A prefix above the namespace depth covers ranges on several shards:
    the watch sees each put once, goes on after its connection breaks, and
    a new watch started from its position delivers exactly what it missed."""
    names = [f"/pyw/n{i}/k" for i in range(12)]
    with client.watch("/pyw", prefix=True) as w:
        for p in names:
            client.put(p, "1")
        _puts_seen(w, names)
        assert len(set(w.position)) > 1, w.position  # several shards
        w._conn.close()  # the stream breaks: it resubscribes from its position
        again = [p + "2" for p in names]
        for p in again:
            client.put(p, "2")
        _puts_seen(w, again)
        pos = w.position
    missed = [p + "3" for p in names]
    for p in missed:
        client.put(p, "3")
    with client.watch("/pyw", prefix=True, start_position=pos) as w2:
        _puts_seen(w2, missed)
        assert w2.get(timeout=1) is None  # nothing repeated
    with pytest.raises(ValueError):
        client.watch("/pyw/n0/k", start_position=pos)


def test_kv_with_cas_and_ephemeral_keys(cluster, client):
    key = "/kv/cas/counter"
    assert client.get(key) is None
    assert client.cas(key, "1", 0) == 1  # must not exist yet
    with pytest.raises(warden.VersionMismatch):
        client.cas(key, "x", 0)
    for _ in range(3):  # read-modify-write by compare-and-set
        cur = client.get(key)
        client.cas(key, str(int(cur.value) + 1), cur.version)
    assert client.get(key).value == b"4"
    # The Go CLI sees the same entry and its compare-and-set.
    assert cluster.cli("kv", "get", key).stdout.strip().endswith("4")
    assert cluster.cli("kv", "put", key, "5", "--expect-version", "4").returncode == 0
    with pytest.raises(warden.VersionMismatch):
        client.cas(key, "6", 4)
    assert [e.key for e in client.list("/kv/cas")] == [key]
    assert client.delete(key, expect_version=5) and not client.delete(key)

    with client.session(ttl=10) as s:
        client.put("/kv/cas/eph", b"\x00\xff", session=s)
        got = client.get("/kv/cas/eph")
        assert got.value == b"\x00\xff" and got.lease == s.lease
    assert client.get("/kv/cas/eph") is None  # gone with the session
    client.put("/kv/cas/empty", b"")
    assert client.get("/kv/cas/empty").value == b""


def test_single_lock_lease(cluster, client):
    lease = client.acquire("/locks/single/x", ttl=5)
    assert lease.alive and lease.lease >> 63 == 1  # server-made single-lock lease
    assert cluster.cli("lock", "--try", "/locks/single/x", "--", "true").returncode == 2
    lease.renew(10)
    with pytest.raises(warden.Conflict):
        client.acquire("/locks/single/x", ttl=5, timeout=0)
    lease.release()
    assert not lease.alive
    with client.acquire("/locks/single/x", ttl=5) as again:
        assert again.token > lease.token


def test_semaphore_and_multilock(client):
    with client.session(ttl=10) as s:
        sem = s.semaphore("/pools/py/conns", 2)
        p1, p2 = sem.acquire(), sem.acquire()
        assert p1.token != p2.token
        assert sem.try_acquire() is None
        with pytest.raises(warden.Conflict):  # an exclusive parent waits for every permit
            s.lock("/pools/py").acquire(timeout=0)
        p1.release()
        with sem.acquire(timeout=5) as p3:
            assert p3.held
        p2.release()

        paths = ["/acct/alice", "/acct/bob", "/bank/carol", "/bank/dave", "/cash/erin"]
        with s.lock_all(paths) as ml:
            assert sorted(ml.tokens) == sorted(paths)
            assert not s.lock("/acct/bob").try_acquire()
            with pytest.raises(warden.Conflict):
                s.lock_all(["/cash/erin", "/cash/frank"], timeout=0)
            assert s.lock("/cash/frank").try_acquire()  # the failed set released what it took
        assert s.lock("/acct/bob").try_acquire()


def test_timeout_withdraws_the_wait(client):
    with client.session(ttl=10) as s:
        holder = s.lock("/locks/to/x")
        holder.acquire()
        waiter = s.lock("/locks/to/x")
        t0 = time.monotonic()
        with pytest.raises(warden.Timeout):
            waiter.acquire(timeout=0.3)
        assert time.monotonic() - t0 >= 0.3
        assert not client.lock_info("/locks/to/x").waiters
        holder.release()
        assert waiter.try_acquire()


def test_typed_errors(client):
    with pytest.raises(warden.InvalidArgument):
        client.put("relative/path", "x")
    with pytest.raises(warden.TooLarge):
        client.put("/kv/big", b"x" * 5000)
    with pytest.raises(warden.InvalidArgument):
        client.session(ttl=0.5).lock("/locks/x").acquire(timeout=0)
    assert warden.is_retryable(warden.Unavailable("x")) and not warden.is_retryable(warden.Conflict("x"))


def _wait_for(check, timeout: float = 30):
    end_at = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end_at, "condition not met in time"
        time.sleep(0.02)


def test_retries_after_lost_answers_apply_once(cluster, client):
    """Answers lost on a connection that then breaks: the client sends the
    same requests again, with the same Seq, on a new connection, and gets the
    first outcome: the put's version stays 1, the lock has one hold."""
    proxy = Proxy(cluster.addrs[1])
    try:
        with warden.Client(proxy.addr, direct_routing=False, attempt_timeout=30, pool_size=1) as c, \
                c.session(ttl=10) as s:  # one connection, open before answers are dropped
            proxy.drop_answers = True
            done = []
            t = threading.Thread(target=lambda: done.append(c.put("/kv/once/x", "1")))
            t.start()
            _wait_for(lambda: client.get("/kv/once/x") is not None)  # applied, answer dropped
            proxy.drop_answers = False
            proxy.sever()
            t.join(30)
            assert done == [1] and client.get("/kv/once/x").version == 1

            lock = s.lock("/locks/once/x")
            proxy.drop_answers = True
            t = threading.Thread(target=lock.acquire)
            t.start()
            _wait_for(lambda: client.lock_info("/locks/once/x").holders if _exists(client, "/locks/once/x") else [])
            proxy.drop_answers = False
            proxy.sever()
            t.join(30)
            holders = client.lock_info("/locks/once/x").holders
            assert lock.held and lock.count == 1
            assert [(h.token, h.count) for h in holders] == [(lock.token, 1)]
            lock.release()
    finally:
        proxy.close()


def _exists(client, path) -> bool:
    try:
        client.lock_info(path)
        return True
    except warden.NotFound:
        return False


def test_giving_up_a_wait_never_leaves_a_hold(client):
    """Withdrawing a parked acquire (what a caller that gives up does): a wait
    still queued is cancelled; one granted meanwhile is given back, so
    nothing stays held by a caller that gave up."""
    from warden import wire
    path = "/locks/giveup/x"
    with client.session(ttl=10) as s:
        holder = s.lock(path)
        holder.acquire()
        released = []

        def park(owner: str):
            req = s._fields(wire.Request(op=wire.Op.ACQUIRE, path=path, owner=owner, wait=wire.WAIT_FOREVER))
            req.client, req.seq = client.id, client._seqs.take()
            conn, _ = client._conn_for(path, time.monotonic() + 5)
            call = conn.send(req)
            _wait_for(lambda: any(w.owner == owner for w in client.lock_info(path).waiters))
            return req, call

        def give_back(owner):
            return lambda p, token: released.append(client.release(p, token, lease=s.lease, owner=owner))

        req, call = park("queued")
        assert client._withdraw(req, give_back("queued")) == (True, True)
        assert call.wait(10).code == wire.Code.CANCELLED
        assert not client.lock_info(path).waiters and released == []

        req, call = park("granted")
        holder.release()
        granted = call.wait(10)
        assert granted.code == wire.Code.OK and granted.token > holder.token
        assert client._withdraw(req, give_back("granted")) == (True, True)
        assert released == [0]
        with pytest.raises(warden.NotFound):
            client.lock_info(path)
