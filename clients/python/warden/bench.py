"""Lock cycles per second from Python: ``python -m warden.bench``.

Each thread takes and releases a lock of its own (one acquire and one
release, each a Raft-committed round trip) on a shared session, as fast as
it can, for --duration seconds; the figures are printed per thread count
and, with --out, written as JSON. Start a cluster first (``make run``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import threading
import time

from .client import Client


def run(client: Client, threads: int, duration: float, prefix: str) -> dict:
    latencies: list[list[float]] = [[] for _ in range(threads)]
    start = threading.Barrier(threads + 1)
    stop = threading.Event()
    errors: list[BaseException] = []

    with client.session(ttl=10) as s:
        def worker(i: int) -> None:
            lock = s.lock(f"{prefix}/t{i}")
            mine = latencies[i]
            start.wait()
            try:
                while not stop.is_set():
                    t0 = time.perf_counter()
                    lock.acquire()
                    lock.release()
                    mine.append(time.perf_counter() - t0)
            except BaseException as e:  # reported, not swallowed
                errors.append(e)

        ts = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(threads)]
        for t in ts:
            t.start()
        start.wait()
        t0 = time.perf_counter()
        time.sleep(duration)
        stop.set()
        for t in ts:
            t.join()
        elapsed = time.perf_counter() - t0
    if errors:
        raise errors[0]
    all_lat = sorted(x for lat in latencies for x in lat)
    n = len(all_lat)

    def q(p: float) -> float:
        return all_lat[min(int(p * n), n - 1)] * 1000 if n else 0.0

    return {"threads": threads, "cycles": n, "seconds": round(elapsed, 3), "cycles_per_s": round(n / elapsed, 1),
            "p50_ms": round(q(0.50), 2), "p99_ms": round(q(0.99), 2)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m warden.bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--endpoints", default=os.environ.get("WARDEN_ENDPOINTS", "127.0.0.1:7070,127.0.0.1:7071,127.0.0.1:7072"))
    ap.add_argument("--threads", default="1,64", help="thread counts to run, comma-separated")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per thread count")
    ap.add_argument("--prefix", default="/bench/python", help="lock path prefix (one lock per thread below it)")
    ap.add_argument("--pool", type=int, default=2, help="connections per client")
    ap.add_argument("--out", help="write the results as JSON to this file")
    args = ap.parse_args(argv)
    results = []
    with Client(args.endpoints, pool_size=args.pool) as c:
        time.sleep(0.5)  # the route table arrives in the background
        print(f"{'threads':>7}  {'cycles/s':>9}  {'p50 ms':>7}  {'p99 ms':>7}  cycles")
        for n in (int(x) for x in args.threads.split(",")):
            r = run(c, n, args.duration, args.prefix)
            results.append(r)
            print(f"{r['threads']:>7}  {r['cycles_per_s']:>9.1f}  {r['p50_ms']:>7.2f}  {r['p99_ms']:>7.2f}  {r['cycles']}")
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        doc = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "python": platform.python_version(),
               "machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "endpoints": args.endpoints,
               "duration_s": args.duration, "results": results}
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=2)


if __name__ == "__main__":
    main()
