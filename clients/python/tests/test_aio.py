"""warden.aio against a real cluster: the asyncio facade keeps the
thread-based client's guarantees, a cancelled wait leaves nothing queued or
held, and the event loop never blocks on a wait. The sync client (the
`client` fixture) is the independent observer and the third party."""

from __future__ import annotations

import asyncio
import threading

import pytest

import warden
import warden.aio
from warden import wire

LIVENESS = 120  # cap on each test's event loop; no test asserts how fast anything came


def run(coro):
    async def capped():
        async with asyncio.timeout(LIVENESS):
            return await coro
    return asyncio.run(capped())


async def until(check, what: str = "condition") -> None:
    """Polls check (a coroutine function or a plain one) until it is true."""
    while True:
        r = check()
        if asyncio.iscoroutine(r):
            r = await r
        if r:
            return
        await asyncio.sleep(0.05)


async def queued(c: warden.aio.Client, path: str, n: int = 1) -> None:
    """Waits until path has at least n waiters in the service."""
    async def enough():
        return len((await c.lock_info(path)).waiters) >= n
    await until(enough)


def test_aio_lock_mutual_exclusion_and_fencing(cluster):
    """Two tasks take one path in turn through two Lock objects: never both
    inside, and the fencing tokens they see increase."""
    path = "/locks/aio/mutex"
    tokens: list[int] = []
    inside = 0

    async def worker(s, n: int):
        nonlocal inside
        for _ in range(n):
            async with s.lock(path) as lock:
                assert inside == 0 and lock.held
                inside += 1
                tokens.append(lock.token)
                await asyncio.sleep(0.01)  # other tasks run meanwhile
                inside -= 1
            assert not lock.held and lock.lost is None

    async def main():
        async with warden.aio.Client(cluster.endpoints) as c, c.session(ttl=10) as s:
            await asyncio.gather(worker(s, 5), worker(s, 5))
            lock = s.lock(path)
            assert await lock.try_acquire()
            other = s.lock(path)
            assert not await other.try_acquire()  # held by another owner
            assert await lock.acquire() == lock.token and lock.count == 2  # reentrant
            assert await lock.release() == 1 and await lock.release() == 0
            with pytest.raises(warden.NotHolder):
                await lock.release()

    run(main())
    assert len(tokens) == 10 and tokens == sorted(tokens) and len(set(tokens)) == 10


def _holders(client, path: str) -> list:
    """path's holders as the sync client reads them ([] when nothing is there)."""
    try:
        return client.lock_info(path).holders
    except warden.NotFound:
        return []


def _hold(client, path: str):
    """A sync session holding path: (session, lock)."""
    s = client.session(ttl=10)
    lock = s.lock(path)
    lock.acquire()
    return s, lock


def test_aio_cancelled_acquire_leaves_nothing(cluster, client):
    """A task cancelled while its acquire waits behind a sync holder: the
    CancelledError comes only once the wait is withdrawn, so the service lists
    no waiter at that moment, and on the holder's release a third party's try
    gets the lock (an abandoned wait would have been granted it instead)."""
    path = "/locks/aio/cancel"
    holder_s, holder = _hold(client, path)

    async def main():
        async with warden.aio.Client(cluster.endpoints) as c, c.session(ttl=10) as s:
            lock = s.lock(path)
            task = asyncio.create_task(lock.acquire())
            await queued(c, path)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            info = client.lock_info(path)
            assert info.waiters == [] and [h.token for h in info.holders] == [holder.token]
            assert not lock.held and lock.count == 0
            holder.release()
            with client.session(ttl=10) as third:
                other = third.lock(path)
                assert other.try_acquire()
                other.release()

    try:
        run(main())
    finally:
        holder_s.close()


def test_aio_timeout_on_every_kind_of_wait(cluster, client):
    """asyncio.timeout on a lock's, a semaphore's, a multi-lock's and a
    campaign's wait raises TimeoutError with nothing of the task queued or
    held: every path's only holder is the sync one, and an election whose
    leader resigns has no leader (a queued candidate would have been elected)."""
    base = "/locks/aio/timeout"
    holder_s = client.session(ttl=10)
    lock = holder_s.lock(f"{base}/lock")
    lock.acquire()
    permit = holder_s.semaphore(f"{base}/sem", 1).acquire()
    blocker = holder_s.lock(f"{base}/multi/b")
    blocker.acquire()
    leader = holder_s.election(f"{base}/elect")
    leader.campaign(b"sync")

    async def main():
        async with warden.aio.Client(cluster.endpoints) as c, c.session(ttl=10) as s:
            waits = {
                "lock": lambda: s.lock(f"{base}/lock").acquire(),
                "sem": lambda: s.semaphore(f"{base}/sem", 1).acquire(),
                "multi": lambda: s.lock_all([f"{base}/multi/a", f"{base}/multi/b"]),
                "elect": lambda: s.election(f"{base}/elect").campaign(b"aio"),
            }
            for name, wait in waits.items():
                with pytest.raises(TimeoutError):
                    async with asyncio.timeout(1.0):
                        await wait()
                assert not c.sync._seqs._live, name  # no withdrawal left in the background

    try:
        run(main())
        for path, token in ((f"{base}/lock", lock.token), (f"{base}/sem", permit.token),
                            (f"{base}/multi/b", blocker.token)):
            info = client.lock_info(path)
            assert info.waiters == [] and [h.token for h in info.holders] == [token], path
        assert _holders(client, f"{base}/multi/a") == []
        leader.resign()
        assert client.leader(f"{base}/elect") is None
    finally:
        holder_s.close()


RACES = {  # what a task awaits, the op whose answer is the grant, and the paths it takes
    "lock": (lambda c, s, p: s.lock(p).acquire(), wire.Op.ACQUIRE, ["/locks/aio/race/lock"]),
    "try": (lambda c, s, p: s.lock(p).try_acquire(), wire.Op.ACQUIRE, ["/locks/aio/race/try"]),
    "sem": (lambda c, s, p: s.semaphore(p, 2).acquire(), wire.Op.ACQUIRE, ["/locks/aio/race/sem"]),
    "multi": (lambda c, s, p: s.lock_all([p, p + "2"]), wire.Op.ACQUIRE_MULTI,
              ["/locks/aio/race/multi", "/locks/aio/race/multi2"]),
    "elect": (lambda c, s, p: s.election(p).campaign(b"x"), wire.Op.CAMPAIGN, ["/locks/aio/race/elect"]),
    "lease": (lambda c, s, p: c.acquire(p, ttl=30), wire.Op.ACQUIRE, ["/locks/aio/race/lease"]),
}


@pytest.mark.parametrize("kind", sorted(RACES))
def test_aio_grant_racing_the_cancel_is_given_back(cluster, client, kind):
    """The grant arrives, then the task is cancelled before the worker hands
    it over: it is given back (released, or resigned) before CancelledError
    propagates."""
    take, op, paths = RACES[kind]
    granted, proceed = threading.Event(), threading.Event()

    async def main():
        async with warden.aio.Client(cluster.endpoints) as c, c.session(ttl=10) as s:
            real = c.sync._call

            def slow_grant(req, **kw):
                resp = real(req, **kw)
                if req.op == op:
                    granted.set()
                    proceed.wait(LIVENESS)
                return resp

            c.sync._call = slow_grant
            task = asyncio.ensure_future(take(c, s, paths[0]))
            await asyncio.to_thread(granted.wait, LIVENESS)
            assert _holders(client, paths[0]) or client.leader(paths[0])
            task.cancel()
            await asyncio.sleep(0.1)  # the cancellation reaches the task while the worker holds the grant
            proceed.set()
            with pytest.raises(asyncio.CancelledError):
                await task
            c.sync._call = real
            for p in paths:
                assert _holders(client, p) == [], p
            assert client.leader(paths[0]) is None

    run(main())


def test_aio_session_end_ends_a_parked_wait(cluster, client):
    """Closing the session while one of its acquires waits ends the wait
    with SessionExpired (the session's abort and the task's are one); the
    state change reaches on_state on the loop."""
    path = "/locks/aio/session-end"
    holder_s, holder = _hold(client, path)

    async def main():
        async with warden.aio.Client(cluster.endpoints) as c:
            s = await c.session(ttl=10)
            states = []
            s.on_state(lambda state: states.append((state, threading.get_ident())))
            waiting = asyncio.create_task(s.lock(path).acquire())
            await queued(c, path)
            await s.close()
            with pytest.raises(warden.SessionExpired):
                await waiting
            await until(lambda: states)
            assert states == [(warden.CLOSED, threading.get_ident())]  # on the loop's thread
            info = client.lock_info(path)
            assert info.waiters == [] and [h.token for h in info.holders] == [holder.token]

    try:
        run(main())
    finally:
        holder_s.close()


def test_aio_loop_stays_responsive_while_50_tasks_wait(cluster, client):
    """50 tasks wait on one lock held by the sync client while a ticker keeps
    ticking; on release each gets it in turn, with increasing tokens."""
    path = "/locks/aio/fifty"
    holder_s, holder = _hold(client, path)
    ticks = 0
    order: list[int] = []

    async def ticker():
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    async def waiter(s):
        async with s.lock(path) as lock:
            order.append(lock.token)

    async def main():
        async with warden.aio.Client(cluster.endpoints) as c, c.session(ttl=10) as s:
            tick = asyncio.create_task(ticker())
            tasks = [asyncio.create_task(waiter(s)) for _ in range(50)]
            await queued(c, path, 50)
            before = ticks
            await until(lambda: ticks >= before + 20)  # the loop runs while 50 acquires wait
            assert not order
            await asyncio.to_thread(holder.release)
            await asyncio.gather(*tasks)
            tick.cancel()

    try:
        run(main())
    finally:
        holder_s.close()
    assert len(order) == 50 and order == sorted(order) and len(set(order)) == 50


def test_aio_waits_beyond_the_pool_queue_in_the_client(cluster, client):
    """With one wait thread, a second wait queues in the client, unsent (the
    service lists one waiter), and its cancellation sends nothing; releases
    and other calls never queue behind the waits."""
    path = "/locks/aio/pool"

    async def main():
        async with warden.aio.Client(cluster.endpoints, max_workers=1) as c, c.session(ttl=10) as s:
            holder = s.lock(path)
            await holder.acquire()
            first = asyncio.create_task(s.lock(path).acquire())
            second = asyncio.create_task(s.lock(path).acquire())
            await queued(c, path)
            await asyncio.sleep(0.2)
            assert len((await c.lock_info(path)).waiters) == 1 and not second.done()
            second.cancel()
            with pytest.raises(asyncio.CancelledError):
                await second
            assert len((await c.lock_info(path)).waiters) == 1
            assert await holder.release() == 0  # a call thread, not the busy wait thread
            token = await first
            assert token > holder.token
            assert [h.token for h in (await c.lock_info(path)).holders] == [token]

    run(main())
    assert _holders(client, path) == []  # the session's end released it


def test_aio_shared_locks_semaphores_and_multilocks(cluster, client):
    async def main():
        async with warden.aio.Client(cluster.endpoints) as c, c.session(ttl=10) as s:
            r1, r2 = s.rlock("/locks/aio/shared"), s.rlock("/locks/aio/shared")
            assert await r1.acquire() and await r2.try_acquire()  # readers share
            assert not await s.lock("/locks/aio/shared").try_acquire()  # a writer is excluded
            await r1.release()
            await r2.release()
            sem = s.semaphore("/pools/aio", 2)
            async with sem.acquire() as p1, sem.acquire() as p2:
                assert p1.held and p2.held and p1.token != p2.token
                assert await sem.try_acquire() is None  # both permits taken
            assert not p1.held and not p2.held
            paths = ["/locks/aio/multi/x", "/locks/aio/multi/y"]
            async with s.lock_all(paths) as ml:
                assert sorted(ml.tokens) == paths and ml.held
                assert [h.token for h in client.lock_info(paths[1]).holders] == [ml.tokens[paths[1]]]
            assert not ml.held and all(_holders(client, p) == [] for p in paths)

    run(main())


def test_aio_hold_loss_reaches_the_holder(cluster, client):
    """A forced revocation by the Go CLI: wait_lost returns the HoldLost,
    on_lost runs on the event loop's thread, leaving the block raises it."""
    path = "/locks/aio/lost"

    async def main():
        async with warden.aio.Client(cluster.endpoints) as c, c.session(ttl=10) as s:
            seen: list = []
            loop_thread = threading.get_ident()
            with pytest.raises(warden.HoldLost) as raised:
                async with s.lock(path) as lock:
                    lock.on_lost(lambda err: seen.append((err, threading.get_ident())))
                    assert await lock.wait_lost(0.1) is None and lock.held
                    r = await asyncio.to_thread(cluster.cli, "locks", "revoke", path, "--force", "--grace", "0")
                    assert r.returncode == 0, r.stderr
                    err = await lock.wait_lost()
                    assert isinstance(err, warden.HoldLost) and err.cause == warden.Cause.FORCED
                    assert not lock.held and lock.lost is err
                    await until(lambda: seen)
                    assert seen == [(err, loop_thread)]
            assert raised.value.token == lock.token and s.alive

    run(main())


def test_aio_watch_in_order_and_closed_by_break(cluster):
    """Idle watches hold no thread (three of them on a client with one call
    worker, and KV calls still run); a watch sees five puts in order, and
    breaking its loop ends it."""
    key = "/kv/aio/watch/k"

    async def main():
        async with warden.aio.Client(cluster.endpoints, call_workers=1) as c:
            idle = [c.watch(f"/kv/aio/idle/{i}") for i in range(3)]
            for w in idle:
                await w.__aenter__()
            w = c.watch(key)
            await w.__aenter__()
            for i in range(5):
                await c.put(key, str(i))
            seen = []
            async for ev in w:
                seen.append(ev)
                if len(seen) == 5:
                    break
            assert [(ev.value, ev.version) for ev in seen] == [(str(i).encode(), i + 1) for i in range(5)]
            assert [ev.rev for ev in seen] == sorted(ev.rev for ev in seen)
            await until(lambda: w._sync._closed.is_set())  # the loop's end closed the sync watch
            assert await w.get(0.1) is None
            for w in idle:
                await w.close()

    run(main())


def test_aio_election_campaign_observe_resign(cluster):
    """Two async candidates: the second is elected when the first resigns;
    an observer sees both; a campaign's cancellation withdraws it."""
    path = "/elections/aio"

    async def main():
        async with warden.aio.Client(cluster.endpoints) as c, c.session(ttl=10) as s:
            a, b = s.election(path), s.election(path)
            token_a = await a.campaign(b"a")
            assert a.is_leader and token_a
            leaders = []
            async with c.observe(path) as obs:
                it = aiter(obs)
                leaders.append(await anext(it))
                second = asyncio.create_task(b.campaign(b"b"))
                await asyncio.sleep(0.2)
                assert not second.done()
                await a.resign()
                token_b = await second
                assert token_b > token_a and b.is_leader and not a.is_leader
                leaders.append(await anext(it))
                await it.aclose()
            assert [(ld.value, ld.token) for ld in leaders] == [(b"a", token_a), (b"b", token_b)]
            assert (await c.leader(path)).value == b"b"
            async with b:
                await b.proclaim(b"b2")
                assert (await b.leader()).value == b"b2"
            assert await c.leader(path) is None  # leaving the block resigned

    run(main())


def test_aio_kv_cas_and_leases(cluster):
    """KV put/cas/get/list/delete, an ephemeral key of an async session, a
    single-lock lease, and revoke requests as an async iterator."""
    async def main():
        async with warden.aio.Client(cluster.endpoints) as c:
            key = "/config/aio/x"
            assert await c.put(key, "1") == 1
            assert await c.cas(key, "2", version=1) == 2
            with pytest.raises(warden.VersionMismatch):
                await c.cas(key, "3", version=1)
            assert (await c.get(key)).value == b"2"
            assert [kv.key for kv in await c.list("/config/aio")] == [key]
            assert await c.delete(key) and await c.get(key) is None
            async with c.session(ttl=10) as s:
                await c.put("/config/aio/eph", "e", session=s)
                assert (await c.get("/config/aio/eph")).lease == s.lease
            assert await c.get("/config/aio/eph") is None  # gone with the session

            async with c.acquire("/locks/aio/lease", ttl=10) as lease:
                assert lease.alive and lease.token
                await lease.renew(10)
            with pytest.raises(warden.NotFound):
                await c.lock_info("/locks/aio/lease")  # nothing held or awaited there

            async with c.session(ttl=10) as s:
                lock = s.lock("/locks/aio/revocable", revocable=True)
                await lock.acquire()
                reqs = lock.revoke_requests()
                await reqs.__aenter__()
                called = asyncio.Event()
                lock.on_revoke_requested(lambda r: called.set())  # a coroutine would run as a task
                assert await c.revoke_lock(lock.path, grace=30) == 1
                r = await reqs.get(LIVENESS)
                assert (r.path, r.token) == (lock.path, lock.token)
                await called.wait()
                await lock.release()
                assert await reqs.get(LIVENESS) is None and reqs.ended  # the release ended it

    run(main())


def test_aio_bad_use_gets_typed_errors(cluster, client):
    """Misuse raises the warden errors, and closing the client ends a wait
    in flight with Closed instead of leaving it hanging."""
    path = "/locks/aio/bad"
    holder_s, _ = _hold(client, path)

    async def main():
        c = warden.aio.Client(cluster.endpoints)
        with pytest.raises(ValueError):
            await c.session(ttl=0)
        async with c.session(ttl=10) as s:
            with pytest.raises(warden.NotHolder):
                await s.lock("/locks/aio/bad").release()
            with pytest.raises(warden.NotHolder):
                s.lock("/locks/aio/bad").revoke_requests()
        with pytest.raises(warden.SessionExpired):
            await s.lock("/locks/aio/bad").acquire()
        s = await c.session(ttl=10)
        waiting = asyncio.create_task(s.lock(path).acquire())
        watch = c.watch("/kv/aio/bad")
        await watch.__aenter__()
        await queued(c, path)
        await c.close()
        with pytest.raises(warden.Closed):
            await waiting
        with pytest.raises(warden.Closed):
            await watch.get()
        await watch.close()
        with pytest.raises(warden.Closed):
            await c.get("/config/aio/x")
        with pytest.raises(warden.Closed):
            await c.session(ttl=10)

    try:
        run(main())
    finally:
        holder_s.close()
