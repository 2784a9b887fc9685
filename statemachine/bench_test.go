package statemachine

import (
	"bytes"
	"fmt"
	"runtime"
	"syscall"
	"testing"

	sm "github.com/lni/dragonboat/v4/statemachine"
	"github.com/wardenlock/warden/wire"
)

const opsPerEntry = 64

func benchConfig() Config {
	cfg := testConfig()
	cfg.MaxLeaseLock = 4 * million // one session holds them all
	return cfg
}

func benchSM(b *testing.B) *StateMachine {
	s := New(benchConfig())
	cmd, _ := EncodeCommand(nil, 1, []*wire.Request{{Op: wire.OpSetRanges, Gen: 1, Ranges: []wire.Range{{Shard: 7}}}})
	s.Update(sm.Entry{Index: 1, Cmd: cmd})
	return s
}

// entries pre-encodes n ops, opsPerEntry per entry, built by mk(i).
func entries(n int, mk func(i int) *wire.Request) [][]byte {
	var out [][]byte
	ops := make([]*wire.Request, 0, opsPerEntry)
	for i := 0; i < n; i++ {
		ops = append(ops, mk(i))
		if len(ops) == opsPerEntry || i == n-1 {
			cmd, _ := EncodeCommand(nil, 2, ops)
			out = append(out, cmd)
			ops = ops[:0]
		}
	}
	return out
}

func run(b *testing.B, s *StateMachine, es [][]byte) {
	for i, cmd := range es {
		s.Update(sm.Entry{Index: uint64(i + 2), Cmd: cmd})
	}
}

// timed is run for the measured part: besides ns/op it reports the CPU
// time the process spent per op (GC workers included), which says more
// than wall time on a machine shared with other builds.
func timed(b *testing.B, s *StateMachine, es [][]byte) {
	cpu := cpuTime()
	b.ResetTimer()
	run(b, s, es)
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
}

func cpuTime() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkApplyAcquire: uncontended acquires of fresh paths under one
// session lease, 64 per entry; ns/op is per acquire, decode included.
func BenchmarkApplyAcquire(b *testing.B) {
	benchAcquire(b, "/locks/bench/k-%d", 1)
}

// BenchmarkApplyAcquireDepth8 is the same eight levels deep.
func BenchmarkApplyAcquireDepth8(b *testing.B) {
	benchAcquire(b, "/locks/a/b/c/d/e/f/k-%d", 1)
}

// BenchmarkApplyAcquireSingleLease makes a single-lock lease per acquire.
func BenchmarkApplyAcquireSingleLease(b *testing.B) {
	benchAcquire(b, "/locks/bench/k-%d", 0)
}

func benchAcquire(b *testing.B, format string, lease uint64) {
	s := benchSM(b)
	es := entries(b.N, func(i int) *wire.Request {
		return &wire.Request{ID: uint64(i), Op: wire.OpAcquire, Path: fmt.Sprintf(format, i), Lease: lease, TTL: 10000}
	})
	b.ReportAllocs()
	timed(b, s, es)
}

// BenchmarkApplyAcquireOneOfFour is BenchmarkApplyAcquire on a shard that
// owns one of four ranges (as with 4 data shards): every op is checked
// against the shard's ranges and counted in its range's load.
func BenchmarkApplyAcquireOneOfFour(b *testing.B) {
	s := New(benchConfig())
	k := func(i uint64) string { return string([]byte{byte(i << 6), 0, 0, 0, 0, 0, 0, 0}) }
	rs := []wire.Range{{End: k(1), Shard: 7}, {Start: k(1), End: k(2), Shard: 8}, {Start: k(2), End: k(3), Shard: 9}, {Start: k(3), Shard: 10}}
	cmd, _ := EncodeCommand(nil, 1, []*wire.Request{{Op: wire.OpSetRanges, Gen: 1, Ranges: rs}})
	s.Update(sm.Entry{Index: 1, Cmd: cmd})
	var paths []string
	for i := 0; len(paths) < b.N; i++ {
		p := fmt.Sprintf("/locks/n%d/k", i)
		if start, _ := wire.Span(p, s.cfg.SplitDepth); start < k(1) {
			paths = append(paths, p)
		}
	}
	es := entries(b.N, func(i int) *wire.Request {
		return &wire.Request{ID: uint64(i), Op: wire.OpAcquire, Path: paths[i], Lease: 1, TTL: 10000}
	})
	b.ReportAllocs()
	timed(b, s, es)
	if s.nLocks != b.N {
		b.Fatalf("%d of %d acquires held", s.nLocks, b.N)
	}
}

// BenchmarkApplyAcquireInflight256: acquires with exactly-once numbers from
// one client id that keeps 256 requests in flight (as a load generator's
// shared client does), so every op raises the ack floor by one while 256
// records are remembered. The floor's cost must not grow with the window.
func BenchmarkApplyAcquireInflight256(b *testing.B) {
	const window = 256
	s := benchSM(b)
	es := entries(b.N, func(i int) *wire.Request {
		seq := uint64(i + 1)
		return &wire.Request{ID: uint64(i), Op: wire.OpAcquire, Path: fmt.Sprintf("/locks/bench/k-%d", i), Lease: 1, TTL: 10000,
			Client: 7, Seq: seq, AckSeq: max(1, seq-min(seq, window))}
	})
	b.ReportAllocs()
	timed(b, s, es)
}

// BenchmarkApplyRelease: releases of held locks, 64 per entry.
func BenchmarkApplyRelease(b *testing.B) {
	s := benchSM(b)
	run(b, s, entries(b.N, func(i int) *wire.Request {
		return &wire.Request{Op: wire.OpAcquire, Path: fmt.Sprintf("/locks/bench/k-%d", i), Lease: 1, TTL: 10000}
	}))
	first := s.fence - uint64(b.N) + 1
	es := entries(b.N, func(i int) *wire.Request {
		return &wire.Request{ID: uint64(i), Op: wire.OpRelease, Path: fmt.Sprintf("/locks/bench/k-%d", i), Token: first + uint64(i)}
	})
	b.ReportAllocs()
	timed(b, s, es)
	if s.nLocks != 0 {
		b.Fatalf("%d locks left", s.nLocks)
	}
}

// BenchmarkHandOff: a release that hands an exclusive lock to the head of
// a long queue on one path (the queue length must not matter).
func BenchmarkHandOff(b *testing.B) {
	s := benchSM(b)
	const queue = 5000
	run(b, s, entries(queue, func(i int) *wire.Request {
		return &wire.Request{Op: wire.OpAcquire, Path: "/locks/hot", Lease: uint64(i + 1), TTL: 10000, Wait: wire.WaitForever}
	}))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		h := leaderOf(s.trie.Find("/locks/hot"))
		cmd, _ := EncodeCommand(nil, 3, []*wire.Request{
			{Op: wire.OpRelease, Path: "/locks/hot", Token: h.token},
			{Op: wire.OpAcquire, Path: "/locks/hot", Lease: h.leaseID(), TTL: 10000, Wait: wire.WaitForever}, // requeue
		})
		b.StartTimer()
		s.Update(sm.Entry{Index: uint64(i + 10), Cmd: cmd})
	}
}

const million = 1_000_000

// BenchmarkMemoryPerLock reports heap bytes per held lock with a million
// locks, under one session lease and as single-lock leases.
func BenchmarkMemoryPerLock(b *testing.B) {
	for _, lease := range []uint64{1, 0} {
		name := "session"
		if lease == 0 {
			name = "single-lock"
		}
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				before := heapInUse()
				s := fill(b, million, lease)
				after := heapInUse()
				b.ReportMetric(float64(after-before)/million, "bytes/lock")
				runtime.KeepAlive(s)
			}
		})
	}
}

// BenchmarkMemoryPerLockOwned is the held scenario's shape: 200k locks
// under /bench/m<j%4096>/k<j>, each with its own owner string as the
// client's Mutex makes them (16 hex digits, '-', 6 letters), under 128
// session leases.
func BenchmarkMemoryPerLockOwned(b *testing.B) {
	const n = 200_000
	for i := 0; i < b.N; i++ {
		before := heapInUse()
		s := benchSM(b)
		const chunk = 64 * 1024
		for start := 0; start < n; start += chunk {
			run(b, s, entries(min(chunk, n-start), func(i int) *wire.Request {
				j := start + i
				return &wire.Request{Op: wire.OpAcquire, Path: fmt.Sprintf("/bench/m%d/k%d", j%4096, j),
					Lease: uint64(j%128 + 1), TTL: 10000, Owner: fmt.Sprintf("%016x-%06d", uint64(j)*0x9e3779b97f4a7c15, j%1_000_000)}
			}))
		}
		s.reqs, s.events = nil, nil
		s.out = nil
		if s.nLocks != n {
			b.Fatalf("%d locks, want %d", s.nLocks, n)
		}
		after := heapInUse()
		b.ReportMetric(float64(after-before)/n, "bytes/lock")
		runtime.KeepAlive(s)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// fill makes a state machine holding n locks; the encoded entries are
// dropped before it returns, so only the state stays on the heap.
func fill(b *testing.B, n int, lease uint64) *StateMachine {
	s := benchSM(b)
	const chunk = 64 * 1024
	for start := 0; start < n; start += chunk {
		es := entries(min(chunk, n-start), func(i int) *wire.Request {
			return &wire.Request{Op: wire.OpAcquire, Path: fmt.Sprintf("/locks/bench/k-%d", start+i), Lease: lease, TTL: 10000}
		})
		run(b, s, es)
	}
	s.reqs, s.events = nil, nil
	s.out = nil
	if s.nLocks != n {
		b.Fatalf("%d locks, want %d", s.nLocks, n)
	}
	return s
}

// BenchmarkSnapshot1M saves and recovers a million locks.
func BenchmarkSnapshot1M(b *testing.B) {
	s := fill(b, million, 1)
	var snap bytes.Buffer
	b.Run("save", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			snap.Reset()
			if err := s.SaveSnapshot(&snap, nil, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(snap.Len())/million, "bytes/lock")
	})
	b.Run("recover", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			r := New(benchConfig())
			if err := r.RecoverFromSnapshot(bytes.NewReader(snap.Bytes()), nil, nil); err != nil {
				b.Fatal(err)
			}
			if r.nLocks != million {
				b.Fatal("lost locks")
			}
		}
	})
}

// BenchmarkSnapshotLoadState saves the state a shard holds under the
// benchmark's load (benchload uncontended, 1024 workers): one lease per
// worker, each holding one lock, and four clients with 256 exactly-once
// records each. It prices our part of a snapshot (encoding) against the
// fsyncs dragonboat adds around it.
func BenchmarkSnapshotLoadState(b *testing.B) {
	const workers = 1024
	s := benchSM(b)
	run(b, s, entries(workers, func(j int) *wire.Request {
		return &wire.Request{Op: wire.OpAcquire, Path: fmt.Sprintf("/bench/w%d/p%d", j, j%16),
			Lease: uint64(j + 1), TTL: 30000, Owner: fmt.Sprintf("%016x-%06d", uint64(j+1), j),
			Client: uint64(j%4 + 1), Seq: uint64(j/4 + 1)}
	}))
	if s.nLocks != workers {
		b.Fatalf("%d locks, want %d", s.nLocks, workers)
	}
	var snap bytes.Buffer
	cpu := cpuTime()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		snap.Reset()
		if err := s.SaveSnapshot(&snap, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(snap.Len()), "bytes")
}

// BenchmarkApplyCycle is the apply side of benchload's uncontended
// scenario: 256 workers, each with its own session lease and 16 paths
// /bench/u<w>-<i>/lock, acquire and release in turn (the release of a
// worker's previous path next to the acquire of its next one, as the
// pipeline mixes them), each Mutex with its own owner, over 4 exactly-once
// clients. Every acquire creates u<w>-<i> and lock under /bench and every
// release prunes them again. ns/op and allocs/op are per op (an acquire or
// a release).
func BenchmarkApplyCycle(b *testing.B) { applyCycle(b, 256, 16, 4) }

// BenchmarkApplyCycleWide is BenchmarkApplyCycle at the shape of the
// cluster runs (benchload --clients 1024): 1024 workers, each its own
// exactly-once client with one request in flight, so every op touches a
// different client, lease and path than the op before (more of the state
// is out of cache).
func BenchmarkApplyCycleWide(b *testing.B) { applyCycle(b, 1024, 16, 1024) }

func applyCycle(b *testing.B, workers, paths, clients int) {
	s, es, check := cycleOps(b, workers, paths, clients, b.N)
	b.ReportAllocs()
	timed(b, s, es)
	check()
}

// BenchmarkApplyCycleShards8 is BenchmarkApplyCycleWide spread over eight
// state machines, as a node applies it with eight data shards: every
// session has its lease and client record in each of them, and their
// entries interleave. Against BenchmarkApplyCycleShards1 (the same ops,
// same entry size, one state machine) it shows what the larger working
// set costs per op (docs/scaling.md).
func BenchmarkApplyCycleShards8(b *testing.B) { applyShards(b, 8) }

// BenchmarkApplyCycleShards1 is BenchmarkApplyCycleShards8's baseline.
func BenchmarkApplyCycleShards1(b *testing.B) { applyShards(b, 1) }

func applyShards(b *testing.B, n int) {
	sms, ess, checks := make([]*StateMachine, n), make([][][]byte, n), make([]func(), n)
	for i := range sms {
		sms[i], ess[i], checks[i] = cycleOps(b, 1024, 16, 1024, (b.N+n-1)/n)
	}
	b.ReportAllocs()
	cpu := cpuTime()
	b.ResetTimer()
	for j := 0; ; j++ {
		k, e := j%n, j/n
		if e >= len(ess[k]) {
			break
		}
		sms[k].Update(sm.Entry{Index: uint64(e + 2 + 1024), Cmd: ess[k][e]})
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	for _, c := range checks {
		c()
	}
}

// cycleOps builds a state machine whose workers each hold a lock and the
// entries of n more ops (a release of a worker's path, then the acquire
// of its next), and a check to run after they are applied.
func cycleOps(b *testing.B, workers, paths, clients, n int) (*StateMachine, [][]byte, func()) {
	s := benchSM(b)
	type held struct {
		path, owner string
		token       uint64
	}
	last := make([]held, workers)
	seqs := make([]uint64, clients)
	next := func(w int) (client, seq, ack uint64) {
		c := w % clients
		seqs[c]++
		return uint64(c + 1), seqs[c], max(1, seqs[c]-min(seqs[c], uint64(workers/clients)))
	}
	acquire := func(i, w, round int) *wire.Request {
		client, seq, ack := next(w)
		last[w] = held{path: fmt.Sprintf("/bench/u%d-%d/lock", w, round%paths), owner: fmt.Sprintf("%016x-%06d", uint64(w+1), i)}
		return &wire.Request{ID: uint64(i), Op: wire.OpAcquire, Path: last[w].path, Lease: uint64(w + 1), TTL: 10000,
			Owner: last[w].owner, Wait: wire.WaitForever, Client: client, Seq: seq, AckSeq: ack}
	}
	// Every worker holds its first path; the k-th acquire after that is
	// granted token base+k.
	run(b, s, entries(workers, func(w int) *wire.Request { return acquire(w, w, 0) }))
	for w := range last {
		last[w].token = s.fence - uint64(workers) + 1 + uint64(w)
	}
	base, acquires := s.fence+1, uint64(0)
	es := entries(n, func(i int) *wire.Request {
		p := i / 2
		w := p % workers
		if i%2 == 0 {
			client, seq, ack := next(w)
			h := last[w]
			return &wire.Request{ID: uint64(i), Op: wire.OpRelease, Path: h.path, Token: h.token,
				Lease: uint64(w + 1), Owner: h.owner, Client: client, Seq: seq, AckSeq: ack}
		}
		r := acquire(i, w, p/workers+1)
		last[w].token = base + acquires
		acquires++
		return r
	})
	return s, es, func() {
		if s.nLocks != workers-n%2 || s.fence != base+acquires-1 {
			b.Fatalf("%d locks held, fence %d, want %d", s.nLocks, s.fence, base+acquires-1)
		}
	}
}
