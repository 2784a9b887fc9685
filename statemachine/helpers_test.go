package statemachine

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	sm "github.com/lni/dragonboat/v4/statemachine"
	"github.com/wardenlock/warden/hierarchy"
	"github.com/wardenlock/warden/wire"
)

// harness drives one state machine through encoded entries, as dragonboat
// would, and checks its invariants after every entry.
type harness struct {
	t      testing.TB
	sm     *StateMachine
	index  uint64
	now    int64
	events []wire.Event
}

type collector struct{ h *harness }

func (c collector) Applied(_ uint64, evs []wire.Event) { c.h.events = append(c.h.events, evs...) }

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.ShardID = 7
	return cfg
}

func newHarness(t testing.TB) *harness { return newHarnessWith(t, testConfig()) }

func newHarnessWith(t testing.TB, cfg Config) *harness {
	h := &harness{t: t, sm: New(cfg), now: 1_000_000}
	h.sm.SetObserver(collector{h})
	h.mustOK(&wire.Request{Op: wire.OpSetRanges, Gen: 1, Ranges: []wire.Range{{Shard: cfg.ShardID}}})
	return h
}

// entry applies ops as one entry and returns the responses.
func (h *harness) entry(ops ...*wire.Request) []wire.Response {
	h.t.Helper()
	cmd, err := EncodeCommand(nil, h.now, ops)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.raw(cmd)
}

func (h *harness) raw(cmd []byte) []wire.Response {
	h.t.Helper()
	h.index++
	res, err := h.sm.Update(sm.Entry{Index: h.index, Cmd: cmd})
	if err != nil {
		h.t.Fatalf("Update returned an error: %v", err)
	}
	out, err := DecodeResults(res.Data)
	if err != nil {
		h.t.Fatalf("DecodeResults: %v", err)
	}
	checkInvariants(h.t, h.sm)
	return out
}

func (h *harness) do(r *wire.Request) wire.Response {
	h.t.Helper()
	return h.entry(r)[0]
}

func (h *harness) mustOK(r *wire.Request) wire.Response {
	h.t.Helper()
	resp := h.do(r)
	if resp.Code != wire.OK {
		h.t.Fatalf("%v %s: got %v (%s), want ok", r.Op, r.Path, resp.Code, resp.Msg)
	}
	return resp
}

func (h *harness) expect(r *wire.Request, code wire.Code) wire.Response {
	h.t.Helper()
	resp := h.do(r)
	if resp.Code != code {
		h.t.Fatalf("%v %s: got %v (%s), want %v", r.Op, r.Path, resp.Code, resp.Msg, code)
	}
	return resp
}

func (h *harness) read(r *wire.Request) *wire.Response {
	h.t.Helper()
	v, err := h.sm.Lookup(r)
	if err != nil {
		h.t.Fatal(err)
	}
	return v.(*wire.Response)
}

// Request builders.

func acq(path string, mode wire.Mode, lease uint64, owner string) *wire.Request {
	return &wire.Request{Op: wire.OpAcquire, Path: path, Mode: mode, Lease: lease, Owner: owner, TTL: 5000}
}

func wait(r *wire.Request) *wire.Request { r.Wait = wire.WaitForever; return r }

func with(r *wire.Request, client, seq uint64) *wire.Request { r.Client, r.Seq = client, seq; return r }

func rel(path string, token uint64) *wire.Request {
	return &wire.Request{Op: wire.OpRelease, Path: path, Token: token}
}

func revoke(lease uint64) *wire.Request { return &wire.Request{Op: wire.OpRevoke, Lease: lease} }

func expire(lease uint64) *wire.Request { return &wire.Request{Op: wire.OpExpire, Lease: lease} }

func cancelReq(client, seq uint64) *wire.Request {
	return &wire.Request{Op: wire.OpCancel, Client: client, Seq: seq}
}

// checkInvariants verifies, by brute force over the state machine's own
// structures, what must hold after every entry.
func checkInvariants(t testing.TB, s *StateMachine) {
	t.Helper()
	var holders []*holder
	var waiters []*waiter
	var nodes []*lockNode
	kvs := 0
	s.trie.Root().Walk(nil, func(n *lockNode) bool {
		nodes = append(nodes, n)
		// Back pointers name the node itself (a reused node must never be
		// reached through what an earlier path left behind).
		forHolders(n, func(h *holder) {
			if h.node != n {
				t.Fatalf("a holder at %s points at another node", n.Path())
			}
			holders = append(holders, h)
		})
		if n.Val.ext != nil {
			for w := n.Val.ext.head; w != nil; w = w.next {
				if w.node != n {
					t.Fatalf("a waiter at %s points at another node", n.Path())
				}
				waiters = append(waiters, w)
			}
			if n.Val.ext.kv != nil {
				kvs++
			}
		}
		if n != s.trie.Root() && n.NumKids() == 0 && !slotInUse(n) && n.HeldHere()+n.Queued() == 0 {
			t.Fatalf("%s is an empty leaf left in the trie", n.Path())
		}
		return true
	})
	if len(holders) != s.nLocks || len(waiters) != s.nWaiters || kvs != s.nKVs {
		t.Fatalf("counts: %d/%d holders, %d/%d waiters, %d/%d kvs", len(holders), s.nLocks,
			len(waiters), s.nWaiters, kvs, s.nKVs)
	}
	for _, l := range s.leases {
		for _, k := range l.keys {
			if k.Detached() || s.trie.Find(k.Path()) != k || k.Val.ext == nil || k.Val.ext.kv == nil {
				t.Fatalf("lease %d lists a key node that holds no key", l.id)
			}
		}
	}
	checkNoConflictingHolders(t, holders)
	checkCounters(t, nodes, holders, waiters)
	checkNothingGrantable(t, s, holders, waiters)
	checkLeaseLinks(t, s, holders, waiters)
	checkExtras(t, s, holders, waiters)
}

// checkExtras: the side tables point at live holders and waiters, and no
// semaphore has more holders than permits.
func checkExtras(t testing.TB, s *StateMachine, hs []*holder, ws []*waiter) {
	t.Helper()
	for token, x := range s.holdX {
		if !slices.Contains(hs, x.h) || x.h.token != token {
			t.Fatalf("holder extras of token %d point at no live holder", token)
		}
	}
	for a := range s.waitX {
		if !slices.ContainsFunc(ws, func(w *waiter) bool { return w.arrival == a }) {
			t.Fatalf("waiter extras of arrival %d have no waiter", a)
		}
	}
	for p, limit := range s.sems {
		n := s.trie.Find(p)
		if n == nil || n.HeldHere() == 0 || n.HeldHere() > limit {
			t.Fatalf("semaphore %s of %d permits has a bad holder count", p, limit)
		}
	}
}

// extraBlocked is the brute-force version of the semaphore and lock-delay
// rules for waiter w.
func extraBlocked(s *StateMachine, hs []*holder, w *waiter) bool {
	path := w.node.Path()
	var permits uint32
	if x := s.waitX[w.arrival]; x != nil {
		permits = x.permits
	}
	limit, here := s.sems[path], uint32(0)
	for _, h := range hs {
		if h.node == w.node {
			here++
		}
	}
	switch {
	case permits == 0 && limit > 0, permits > 0 && limit == 0 && here > 0,
		permits > 0 && limit > 0 && (here >= limit || limit != permits):
		return true
	}
	for p, until := range s.delays {
		if until != 0 && pathsRelated(p, path) {
			return true
		}
	}
	return false
}

func checkNoConflictingHolders(t testing.TB, hs []*holder) {
	t.Helper()
	for i, a := range hs {
		if a.node != nil && a.token == 0 {
			t.Fatal("holder without token")
		}
		for _, b := range hs[i+1:] {
			if hierarchy.Related(a.node, b.node) && conflicts(a.mode, b.mode) {
				t.Fatalf("conflicting holders: %s %v (token %d) and %s %v (token %d)",
					a.node.Path(), a.mode, a.token, b.node.Path(), b.mode, b.token)
			}
		}
	}
}

// checkCounters recomputes every node's conflict counts from the payloads.
func checkCounters(t testing.TB, nodes []*lockNode, hs []*holder, ws []*waiter) {
	t.Helper()
	for _, n := range nodes {
		for _, m := range []wire.Mode{wire.Exclusive, wire.Shared} {
			var want [3]uint32
			for _, h := range hs {
				if p := placement(h.node, n); p >= 0 && conflicts(h.mode, m) {
					want[p]++
				}
			}
			a, b, c := n.HeldConflicts(m)
			if want != [3]uint32{a, b, c} {
				t.Fatalf("%s %v: held counters %v, recomputed %v", n.Path(), m, [3]uint32{a, b, c}, want)
			}
			want = [3]uint32{}
			for _, w := range ws {
				if p := placement(w.node, n); p >= 0 && conflicts(w.mode, m) {
					want[p]++
				}
			}
			a, b, c = n.QueuedConflicts(m)
			if want != [3]uint32{a, b, c} {
				t.Fatalf("%s %v: queued counters %v, recomputed %v", n.Path(), m, [3]uint32{a, b, c}, want)
			}
		}
	}
}

// placement says where x lies relative to n: 0 above, 1 at, 2 below, -1
// unrelated.
func placement(x, n *lockNode) int {
	switch {
	case x == n:
		return 1
	case strictlyBelow(n, x):
		return 0
	case strictlyBelow(x, n):
		return 2
	}
	return -1
}

// checkNothingGrantable: in arrival order, every waiter conflicts with a
// holder or with an earlier waiter (FIFO, no barging, no lost wake-up).
func checkNothingGrantable(t testing.TB, s *StateMachine, hs []*holder, ws []*waiter) {
	t.Helper()
	ws = slices.Clone(ws)
	slices.SortFunc(ws, func(a, b *waiter) int { return cmpU64(a.arrival, b.arrival) })
	for i, w := range ws {
		blocked := extraBlocked(s, hs, w)
		// A queue with a permit waiter in it is strictly FIFO.
		permitsOf := func(x *waiter) bool { e := s.waitX[x.arrival]; return e != nil && e.permits > 0 }
		blocked = blocked || slices.ContainsFunc(ws[:i], func(e *waiter) bool {
			return e.node == w.node && (permitsOf(e) || permitsOf(w))
		})
		for _, h := range hs {
			if hierarchy.Related(h.node, w.node) && conflicts(h.mode, w.mode) {
				blocked = true
				break
			}
		}
		for _, e := range ws[:i] {
			if !blocked && hierarchy.Related(e.node, w.node) && conflicts(e.mode, w.mode) {
				blocked = true
			}
		}
		if !blocked {
			var dump []string
			for _, h := range hs {
				dump = append(dump, fmt.Sprintf("H %s %v tok=%d", h.node.Path(), h.mode, h.token))
			}
			for _, e := range ws {
				dump = append(dump, fmt.Sprintf("W %s %v arr=%d x=%+v", e.node.Path(), e.mode, e.arrival, s.waitX[e.arrival]))
			}
			t.Fatalf("waiter %s %v (client %d seq %d) could be granted but is queued; delays %v sems %v\n%s", w.node.Path(), w.mode, w.client, w.seq, s.delays, s.sems, strings.Join(dump, "\n"))
		}
	}
}

func checkLeaseLinks(t testing.TB, s *StateMachine, hs []*holder, ws []*waiter) {
	t.Helper()
	for _, h := range hs {
		if h.single {
			if s.single(h.leaseID()) != h || h.count != 1 {
				t.Fatalf("single-lock lease %#x does not point at its holder", h.leaseID())
			}
			continue
		}
		l := s.leases[h.lw]
		if l == nil || int(h.leaseIdx) >= len(l.holders) || l.holders[h.leaseIdx] != h {
			t.Fatalf("holder %s token %d is not in live lease %d", h.node.Path(), h.token, h.lw)
		}
	}
	for _, w := range ws {
		if w.lease == 0 {
			continue
		}
		l := s.leases[w.lease]
		if l == nil || int(w.leaseIdx) >= len(l.waiters) || l.waiters[w.leaseIdx] != w {
			t.Fatalf("waiter %s is not in live lease %d", w.node.Path(), w.lease)
		}
	}
	total := s.singles.n
	for _, l := range s.leases {
		total += len(l.holders)
	}
	if total != len(hs) {
		t.Fatalf("leases list %d holders, the trie has %d", total, len(hs))
	}
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
