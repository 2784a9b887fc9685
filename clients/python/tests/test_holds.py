"""Every hold ends in a state its Python holder knows: the service's own
decisions (revocations, hand-overs, an operator's release or resign, the
end of the session's lease) reach the holder as a typed HoldLost, a wait
given up on leaves nothing behind, and no grant counts on a dead session.
Each test checks both the holder's view and the service's (`warden locks
info -o json`, the Go CLI)."""

from __future__ import annotations

import json
import signal
import threading
import time

import pytest

import warden
from conftest import Proxy, end, read_line
from warden import wire

LOST_WITHIN = 60  # generous cap on waits for a notice; no test asserts how fast it came


def service_holders(cluster, path: str) -> list[dict]:
    """The holders of path as `warden locks info -o json` lists them."""
    return service_info(cluster, path)["holders"]


def service_info(cluster, path: str) -> dict:
    r = cluster.cli("locks", "info", path, "-o", "json")
    if r.returncode != 0:
        assert "not found" in (r.stderr + r.stdout).lower(), r.stderr
        return {"holders": [], "waiters": []}
    return json.loads(r.stdout)


def wait_for(check, timeout: float = 60):
    """Waits until check() is true; a check the cluster cannot answer right
    now (Unavailable, Timeout: a leader change) counts as not yet."""
    end_at = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except (warden.Unavailable, warden.Timeout):
            pass
        assert time.monotonic() < end_at, "condition not met in time"
        time.sleep(0.05)


def test_forced_revoke_is_a_loss_the_holder_sees(cluster, client):
    """`warden locks revoke --force --grace 0` ends a Python hold: the lock
    reports HoldLost with cause forced, turns not held, and leaving its
    with block raises the loss; the service lists no holder of that token."""
    path = "/locks/holds/forced"
    with client.session(ttl=10) as s:
        with pytest.raises(warden.HoldLost) as raised:
            with s.lock(path) as lock:
                assert [h["token"] for h in service_holders(cluster, path)] == [lock.token]
                r = cluster.cli("locks", "revoke", path, "--force", "--grace", "0")
                assert r.returncode == 0, r.stderr
                lost = lock.wait_lost(LOST_WITHIN)
                assert lost is not None, "the forced revocation was never noticed"
                assert not lock.held and lock.done.is_set() and lock.lost is lost
        err = raised.value
        assert (err.cause, err.cause_name, err.path, err.token) == (warden.Cause.FORCED, "forced", path, lock.token)
        assert isinstance(err, warden.NotHolder) and not err.session_ended
        assert all(h["token"] != lock.token for h in service_holders(cluster, path))
        assert s.alive  # the session lives on; only the hold ended
        with pytest.raises(warden.HoldLost):
            lock.release()
        again = s.lock(path)
        assert again.try_acquire() and again.token > lock.token
        again.release()


def test_revoke_at_the_deadline_of_a_revocable_lock(cluster, client):
    """A revocable Python hold asked to release within a grace (by `warden
    locks revoke`, no --force) and not released is ended at the deadline:
    the holder's callback gets HoldLost(forced), and a Go waiter is granted
    with a higher token."""
    path = "/locks/holds/graceful"
    with client.session(ttl=10) as s:
        lock = s.lock(path, revocable=True)
        lock.acquire()
        told = []
        called = threading.Event()
        lock.on_lost(lambda err: (told.append(err), called.set()))
        r = cluster.cli("locks", "revoke", path, "--grace", "1s")
        assert r.returncode == 0, r.stderr
        assert called.wait(LOST_WITHIN), "the revocation at the deadline was never noticed"
        assert told[0].cause == warden.Cause.FORCED and told[0].token == lock.token
        assert lock.lost is told[0] and not lock.held
        go = cluster.cli("lock", "--try", path, "--", "sh", "-c", 'echo "$WARDEN_LOCK_TOKEN"')
        assert go.returncode == 0, go.stderr
        assert int(go.stdout.strip()) > lock.token
        assert service_holders(cluster, path) == []


def test_revocable_holder_hears_the_request_and_releases_in_time(cluster, client):
    """A revocable Python hold asked back with a grace (by `warden locks
    revoke`, no --force) hears it through on_revoke_requested, with its
    token and the deadline, before the deadline; it releases, so the hold
    ends as released (no HoldLost) and the service lists no holder."""
    path = "/locks/holds/asked"
    with client.session(ttl=10) as s:
        lock = s.lock(path, revocable=True)
        lock.acquire()
        asked = []
        heard = threading.Event()
        lock.on_revoke_requested(lambda r: (asked.append(r), heard.set()))
        before = time.time()
        r = cluster.cli("locks", "revoke", path, "--grace", "30s")
        assert r.returncode == 0, r.stderr
        assert heard.wait(LOST_WITHIN), "the revocation request never reached the holder"
        req = asked[0]
        assert (req.path, req.token, req.by_admin) == (path, lock.token, False)
        assert before + 25 < req.deadline < time.time() + 31, (before, req.deadline)
        assert lock.held and lock.lost is None  # asked, not yet revoked
        lock.release()
        assert lock.wait_lost(1) is None and lock.end_cause == "released"
        assert service_holders(cluster, path) == []


def test_revoke_request_pending_before_the_holder_asks(cluster, client):
    """A request made before the holder looks is delivered first
    (lock_info's RevokeAt); an admin's request (--force) says so; the
    iterator ends once the hold is released."""
    path = "/locks/holds/pending"
    with client.session(ttl=10) as s:
        lock = s.lock(path)
        lock.acquire()
        r = cluster.cli("locks", "revoke", path, "--force", "--grace", "40s")
        assert r.returncode == 0, r.stderr
        with lock.revoke_requests() as reqs:
            req = reqs.get(timeout=LOST_WITHIN)
            assert req is not None and req.token == lock.token and req.deadline > time.time() + 30
            got = []
            t = threading.Thread(target=lambda: got.extend(reqs))
            t.start()
            lock.release()
            t.join(LOST_WITHIN)
            assert not t.is_alive(), "the requests did not end with the hold"
        assert all(x.token == lock.token for x in got)
        with pytest.raises(warden.NotHolder):
            lock.revoke_requests()


def test_revoke_requests_of_a_single_lock_lease(cluster, client):
    """client.revoke_requests follows any holder's requests; a single-lock
    lease (client.acquire) hears its own."""
    path = "/locks/holds/lease-asked"
    ll = client.acquire(path, ttl=30, revocable=True)
    try:
        with ll.revoke_requests() as reqs, client.revoke_requests(path) as anyone:
            assert client.revoke_lock(path, grace=20) == 1
            mine = reqs.get(timeout=LOST_WITHIN)
            seen = anyone.get(timeout=LOST_WITHIN)
            assert mine is not None and mine.token == ll.token and not mine.by_admin
            assert seen is not None and seen.token == ll.token
    finally:
        ll.release()


def test_election_hand_over_by_an_operator(cluster, client):
    """`warden elect handover` moves a Python leadership to a waiting Go
    candidate: the Python election reports HoldLost(handover) and is not
    the leader; the service lists the Go candidate as the one holder."""
    path = "/elections/holds/handover"
    with client.session(ttl=10) as s:
        e = s.election(path)
        token = e.campaign("python")
        go = cluster.cli_start("elect", "--owner", "go-b", path, "go-node", "--", "sh", "-c",
                               'echo "$WARDEN_LOCK_TOKEN"; read x; true')
        try:
            wait_for(lambda: any(w["owner"] == "go-b" for w in service_info(cluster, path)["waiters"]))
            r = cluster.cli("elect", "handover", path, "go-b")
            assert r.returncode == 0, r.stderr
            go_token = int(read_line(go))
            lost = e.wait_lost(LOST_WITHIN)
            assert lost is not None and lost.cause == warden.Cause.HANDOVER and lost.token == token
            assert not e.is_leader
            with pytest.raises(warden.HoldLost):
                e.proclaim("still me?")
            holders = service_holders(cluster, path)
            assert [(h["owner"], h["token"]) for h in holders] == [("go-b", go_token)] and go_token > token
            assert client.leader(path).owner == "go-b"
        finally:
            assert end(go) == 0


def test_release_and_resign_by_another_client(cluster, client):
    """A release or resign by token from another client (an operator's) ends
    the Python hold without its doing: it is told, with the cause; the
    holder's own release and resign are not losses."""
    with client.session(ttl=10) as s, warden.Client(cluster.endpoints) as operator:
        lock = s.lock("/locks/holds/byother")
        lock.acquire()
        assert operator.release(lock.path, lock.token) == 0
        lost = lock.wait_lost(LOST_WITHIN)
        assert lost is not None and lost.cause == warden.Cause.RELEASED and lost.client == operator.id
        assert not lock.held and service_holders(cluster, lock.path) == []

        e = s.election("/elections/holds/byother")
        token = e.campaign("python")
        operator._call(wire.Request(op=wire.Op.RESIGN, path=e.path, token=token), mutate=True)
        lost = e.wait_lost(LOST_WITHIN)
        assert lost is not None and lost.cause == warden.Cause.RESIGNED
        assert client.leader(e.path) is None and service_holders(cluster, e.path) == []

        own = s.lock("/locks/holds/own")
        own.acquire()
        own.release()
        e2 = s.election("/elections/holds/own")
        e2.campaign("python")
        e2.resign()
        # A later loss is still told; the own ends before it never were.
        third = s.lock("/locks/holds/own")
        third.acquire()
        operator.release(third.path, third.token)
        assert third.wait_lost(LOST_WITHIN) is not None
        assert own.lost is None and e2.lost is None and own.wait_lost(0) is None


def test_the_service_ending_the_session(cluster, client):
    """The session's lease revoked by another client: the session is lost
    and every hold of it (a lock, a permit, an election, a multi-lock) is
    lost with session_ended; nothing of it stays in the service."""
    with warden.Client(cluster.endpoints) as operator:
        s = client.session(ttl=10)
        lock = s.lock("/locks/holds/session/a")
        lock.acquire()
        permit = s.semaphore("/locks/holds/session/pool", 2).acquire()
        e = s.election("/elections/holds/session")
        e.campaign("python")
        ml = s.lock_all(["/locks/holds/session/m1", "/locks/holds/session/m2"])
        operator._call(wire.Request(op=wire.Op.REVOKE, lease=s.lease), mutate=True)
        for hold in (lock, permit, e, ml):
            lost = hold.wait_lost(LOST_WITHIN)
            # revoked as pushed; a keepalive answer that lists the lease as
            # gone first cannot tell expired from revoked
            assert lost is not None and lost.session_ended, hold
            assert lost.cause in (warden.Cause.REVOKED, warden.Cause.EXPIRED), lost
            assert not hold.held
        assert s.done.is_set() and s.state == warden.LOST and not s.alive
        for path in ("/locks/holds/session/a", "/locks/holds/session/pool", "/elections/holds/session",
                     "/locks/holds/session/m1", "/locks/holds/session/m2"):
            assert service_holders(cluster, path) == [], path
        with pytest.raises(warden.SessionExpired):
            s.lock("/locks/holds/session/b").acquire(timeout=0)
        s.close()


def test_timeout_withdrawal_leaves_nothing(cluster, client):
    """A Python wait behind a Go holder that times out is withdrawn: lock
    info lists no Python waiter, and once Go releases, no holder at all."""
    path = "/locks/holds/timeout"
    go = cluster.cli_start("lock", path, "--", "sh", "-c", 'echo "$WARDEN_LOCK_TOKEN"; read x; true')
    try:
        go_token = int(read_line(go))
        with client.session(ttl=10) as s:
            lock = s.lock(path)
            with pytest.raises(warden.Timeout):
                lock.acquire(timeout=0.5)
            assert not lock.held and lock.lost is None
            info = service_info(cluster, path)
            assert info["waiters"] == [] and [h["token"] for h in info["holders"]] == [go_token]
    finally:
        assert end(go) == 0
    assert service_info(cluster, path) == {"holders": [], "waiters": []}


def test_interrupted_wait_is_withdrawn(cluster, client):
    """KeyboardInterrupt in a waiting acquire withdraws the wait: nothing is
    queued or held afterwards."""
    path = "/locks/holds/interrupt"
    with client.session(ttl=10) as s:
        holder = s.lock(path)
        holder.acquire()
        waiter = s.lock(path)
        main = threading.main_thread().ident
        assert threading.get_ident() == main

        queued = []

        def interrupt():
            # Interrupts even when the wait was never seen queued: the
            # acquire below must end either way, and the check says which.
            try:
                wait_for(lambda: client.lock_info(path).waiters)
                queued.append(True)
            finally:
                signal.pthread_kill(main, signal.SIGINT)

        # A suite started in the background inherits SIGINT ignored; this
        # test needs Python's own handler, which raises KeyboardInterrupt.
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            threading.Thread(target=interrupt, daemon=True).start()
            with pytest.raises(KeyboardInterrupt):
                waiter.acquire()
        finally:
            signal.signal(signal.SIGINT, previous)
        assert queued, "the wait was never listed as queued"
        assert not waiter.held
        info = service_info(cluster, path)
        assert info["waiters"] == [] and [h["token"] for h in info["holders"]] == [holder.token]
        holder.release()
        assert service_info(cluster, path) == {"holders": [], "waiters": []}


def test_ambiguous_try_is_resolved_in_the_background(cluster, client):
    """A try whose answers are lost (the proxy drops what the server sends)
    is Ambiguous for the caller; its withdrawal goes on in the background
    and, once answers flow again, gives the grant back: the service lists
    nothing held."""
    path = "/locks/holds/ambiguous"
    proxy = Proxy(cluster.addrs[2])
    try:
        with warden.Client(proxy.addr, direct_routing=False, pool_size=1, timeout=1.5, attempt_timeout=0.5) as c:
            s = c.session(ttl=30)
            lock = s.lock(path)
            proxy.drop_answers = True
            with pytest.raises(warden.Ambiguous):
                lock.acquire(timeout=0)
            assert not lock.held
            wait_for(lambda: service_holders(cluster, path))  # the try was applied; its answer lost
            assert c._seqs._live  # the background withdrawal keeps the try's Seq unfinished
            proxy.drop_answers = False
            wait_for(lambda: service_holders(cluster, path) == [])
            wait_for(lambda: not c._seqs._live)
            s.close()
    finally:
        proxy.close()


def test_a_grant_after_the_local_deadline_is_given_back(cluster, client):
    """A grant that reaches the client after its session's local deadline is
    not reported: it is released and the call raises SessionExpired. (The
    deadline is moved into the past while the grant is on its way.)"""
    path = "/locks/holds/late"
    with client.session(ttl=10) as s:
        real = client._call

        def late(req, **kw):
            resp = real(req, **kw)
            if req.op == wire.Op.ACQUIRE:
                with s._cond:
                    s._deadline = time.monotonic() - 0.001
            return resp

        client._call = late
        try:
            lock = s.lock(path)
            with pytest.raises(warden.SessionExpired):
                lock.acquire(timeout=0)
        finally:
            client._call = real
        assert not lock.held and lock.count == 0
        assert service_holders(cluster, path) == []


def test_a_parked_wait_ends_with_its_session(cluster):
    """A wait parked behind a Go holder ends with SessionExpired when the
    session's local deadline passes (the client's traffic frozen); it is
    withdrawn once the service answers again, and the Go holder's release
    grants nothing to the dead session."""
    path = "/locks/holds/parked"
    proxy = Proxy(cluster.addrs[0])
    go = cluster.cli_start("lock", path, "--", "sh", "-c", 'echo "$WARDEN_LOCK_TOKEN"; read x; true')
    try:
        read_line(go)
        with warden.Client(proxy.addr, direct_routing=False, attempt_timeout=1.0) as c:
            s = c.session(ttl=5)
            lock = s.lock(path)
            failed = []

            def wait() -> None:
                try:
                    lock.acquire()
                except warden.WardenError as e:
                    failed.append(e)

            t = threading.Thread(target=wait)
            t.start()
            wait_for(lambda: service_info(cluster, path)["waiters"])
            proxy.freeze()
            t.join(LOST_WITHIN)
            assert not t.is_alive() and isinstance(failed[0], warden.SessionExpired), failed
            assert s.state == warden.LOST and not lock.held
            proxy.thaw()
            wait_for(lambda: service_info(cluster, path)["waiters"] == [])
    finally:
        proxy.close()
        assert end(go) == 0
    assert service_info(cluster, path) == {"holders": [], "waiters": []}


def test_a_notice_that_overtakes_its_grant(cluster, client):
    """A notice may arrive before the grant it ends (a revocation with no
    grace right after the grant) and twice (pushed, then in a keepalive
    answer): it is kept for the grant on its way, marks that hold lost
    once, and touches no other hold. (The notice here is made by the test,
    delivered as the reader thread delivers pushes.)"""
    path = "/locks/holds/overtaken"
    with client.session(ttl=10) as s:
        other = s.lock("/locks/holds/untouched")
        other.acquire()
        real = client._call
        seen = []

        def overtaken(req, **kw):
            resp = real(req, **kw)
            if req.op == wire.Op.ACQUIRE and req.path == path:
                ev = wire.Event(kind=warden.Kind.RELEASED, cause=warden.Cause.FORCED, path=path, token=resp.token,
                                lease=s.lease)
                client._noticed([ev])
                client._noticed([ev])
            return resp

        client._call = overtaken
        try:
            lock = s.lock(path)
            lock.on_lost(seen.append)
            token = lock.acquire(timeout=0)
        finally:
            client._call = real
        lost = lock.wait_lost(LOST_WITHIN)
        assert lost is not None and lost.cause == warden.Cause.FORCED and lost.token == token
        assert not lock.held and other.held and other.lost is None
        wait_for(lambda: seen)
        assert seen == [lost]
        client.release(path, token, lease=s.lease, owner=lock.owner)  # the service still held it
        assert service_holders(cluster, path) == []


def test_closing_the_session_loses_nothing(cluster, client):
    """Closing a session ends its holds as its owner's doing: the session is
    closed, not lost, its holds are done with no loss, and the service
    holds nothing of it."""
    s = client.session(ttl=10)
    lock = s.lock("/locks/holds/closed")
    lock.acquire()
    s.close()
    assert s.state == warden.CLOSED and s.done.is_set()
    assert lock.done.is_set() and not lock.held and lock.lost is None
    assert service_holders(cluster, "/locks/holds/closed") == []


def test_a_lock_without_a_session_hears_its_end(cluster, client):
    """A LockLease (its own lease, renewed by hand) is told like a session's
    hold: a forced revocation and another client's release reach it as
    HoldLost, pushed long before its TTL; its own release is no loss."""
    for path, end_it, cause in [
        ("/locks/holds/single/forced", lambda ll: cluster.cli("locks", "revoke", ll.path, "--force", "--grace", "0"),
         warden.Cause.FORCED),
        ("/locks/holds/single/released", None, warden.Cause.RELEASED),
    ]:
        lease = client.acquire(path, ttl=600)
        assert lease.held and lease.lost is None
        if end_it is None:
            with warden.Client(cluster.endpoints) as other:  # another client, releasing by token alone
                other.release(path, lease.token)
        else:
            r = end_it(lease)
            assert r.returncode == 0, r.stderr
        lost = lease.wait_lost(LOST_WITHIN)
        assert lost is not None, f"{path}: the end was never noticed"
        assert (lost.cause, lost.path, lost.token) == (cause, path, lease.token)
        assert not lease.held
        with pytest.raises(warden.HoldLost):
            lease.renew()
        assert service_holders(cluster, path) == []

    lease = client.acquire("/locks/holds/single/own", ttl=600)
    lease.release()
    assert lease.wait_lost(2) is None and lease.done.is_set()


def test_a_lock_without_a_session_expires_on_the_clients_clock(cluster, client):
    """A LockLease not renewed within its TTL is lost (expired) by the
    client's own count, which starts at the send: the service's ends later."""
    path = "/locks/holds/single/expired"
    lease = client.acquire(path, ttl=2)
    lease.renew(2)
    lost = lease.wait_lost(LOST_WITHIN)
    assert lost is not None and lost.cause == warden.Cause.EXPIRED and not lease.held
    wait_for(lambda: service_holders(cluster, path) == [])
