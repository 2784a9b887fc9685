package statemachine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"testing"

	sm "github.com/lni/dragonboat/v4/statemachine"
	"github.com/wardenlock/warden/wire"
)

// randomLog records a random command log: the model test's lock traffic
// plus KV, elections, sessions and fences, so snapshots carry every kind of
// state.
func randomLog(t *testing.T, seed uint64, entries int) [][]byte {
	cfg := modelConfig()
	d := &driver{rng: rand.New(rand.NewPCG(seed, 7)), h: newHarnessWith(t, cfg), m: newModel(cfg),
		seqs: map[uint64]uint64{}, last: map[string]uint64{}, codes: map[wire.Code]int{}}
	setRanges, _ := EncodeCommand(nil, 0, []*wire.Request{{Op: wire.OpSetRanges, Gen: 1, Ranges: []wire.Range{{Shard: cfg.ShardID}}}})
	log := [][]byte{setRanges}
	for i := 0; i < entries; i++ {
		d.h.now += int64(d.rng.IntN(300))
		ops := make([]*wire.Request, 1+d.rng.IntN(3))
		for j := range ops {
			ops[j] = d.mixedOp()
		}
		cmd, err := EncodeCommand(nil, d.h.now, ops)
		if err != nil {
			t.Fatal(err)
		}
		log = append(log, cmd)
		if os.Getenv("WARDEN_DEBUG") != "" {
			for _, o := range ops {
				t.Logf("entry %d now %d: %v %s %v mode=%v lease=%d owner=%s permits=%d delay=%d tok=%d wait=%d c=%d s=%d", i, d.h.now, o.Op, o.Path, o.Paths, o.Mode, o.Lease, o.Owner, o.Permits, o.LockDelay, o.Token, o.Wait, o.Client, o.Seq)
			}
		}
		resps := d.h.raw(cmd)
		if os.Getenv("WARDEN_DEBUG") != "" {
			for _, r := range resps {
				t.Logf("   -> %v %s tok=%d grants=%v", r.Code, r.Msg, r.Token, r.Grants)
			}
		}
		d.m.entry(d.h.now, lockOpsOnly(ops)) // keeps the generator's picks realistic
	}
	return log
}

func lockOpsOnly(ops []*wire.Request) []*wire.Request {
	var out []*wire.Request
	for _, r := range ops {
		switch r.Op {
		case wire.OpKVPut, wire.OpKVDelete, wire.OpCampaign, wire.OpProclaim, wire.OpRaiseFence, wire.OpSession,
			wire.OpCheckpoint,
			wire.OpAcquireMulti, wire.OpRevokeLock, wire.OpHandOver, wire.OpDeadlines:
		default:
			out = append(out, r)
		}
	}
	return out
}

func (d *driver) mixedOp() *wire.Request {
	p := d.path()
	switch d.rng.IntN(19) {
	case 18:
		// Checkpoint (or clear) a few leases, single-lock ones included.
		cp := &wire.Request{Op: wire.OpCheckpoint}
		for range 1 + d.rng.IntN(3) {
			id := d.lease()
			if d.rng.IntN(2) == 0 {
				id = SingleLeaseBit | d.token()
			}
			cp.Leases = append(cp.Leases, id)
			cp.Remaining = append(cp.Remaining, int64(d.rng.IntN(3000))-500)
		}
		return cp
	case 0:
		return &wire.Request{Op: wire.OpKVPut, Path: p + "/kv", Value: []byte(fmt.Sprint(d.rng.IntN(9))),
			Lease: uint64(d.rng.IntN(3)), TTL: 5000}
	case 1:
		return &wire.Request{Op: wire.OpKVDelete, Path: p + "/kv"}
	case 2:
		return campaign("/elect", 1+uint64(d.rng.IntN(4)), "c", fmt.Sprint(d.rng.IntN(9)))
	case 3:
		return &wire.Request{Op: wire.OpProclaim, Path: "/elect", Token: d.token(), Value: []byte("p")}
	case 4:
		if d.rng.IntN(4) == 0 {
			return &wire.Request{Op: wire.OpRaiseFence, Token: d.h.sm.fence + 10}
		}
		return &wire.Request{Op: wire.OpSession, Lease: 1 + uint64(d.rng.IntN(6)), TTL: 4000}
	case 5: // semaphores, revocation, lock-delay, priorities: their state must replay and snapshot identically too
		r := d.acquire()
		r.Permits, r.Mode = uint32(1+d.rng.IntN(3)), wire.Shared
		return r
	case 6:
		return &wire.Request{Op: wire.OpAcquireMulti, Paths: []string{p, "/m/" + fmt.Sprint(d.rng.IntN(3))},
			Lease: 1 + uint64(d.rng.IntN(4)), Owner: "m", TTL: 5000}
	case 7:
		return &wire.Request{Op: wire.OpRevokeLock, Path: p, Grace: int64(d.rng.IntN(600)),
			Flags: wire.FlagForce * uint32(d.rng.IntN(2))}
	case 8:
		return &wire.Request{Op: wire.OpDeadlines}
	case 9:
		r := d.acquire()
		r.LockDelay, r.Flags = int64(d.rng.IntN(800))-1, wire.FlagRevocable*uint32(d.rng.IntN(2))
		return r
	case 10:
		c := campaign("/elect", 1+uint64(d.rng.IntN(4)), "c", "v")
		c.Priority = int64(d.rng.IntN(3))
		if d.rng.IntN(2) == 0 {
			return &wire.Request{Op: wire.OpHandOver, Path: "/elect", Token: d.token(), Target: "c"}
		}
		return c
	}
	return d.next()
}

func replay(t *testing.T, s *StateMachine, log [][]byte, from uint64) {
	for i, cmd := range log {
		if _, err := s.Update(sm.Entry{Index: from + uint64(i), Cmd: cmd}); err != nil {
			t.Fatal(err)
		}
	}
}

func snapshot(t *testing.T, s *StateMachine) []byte {
	var b bytes.Buffer
	if err := s.SaveSnapshot(&b, nil, nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func restore(t *testing.T, snap []byte) *StateMachine {
	s := New(modelConfig())
	if err := s.RecoverFromSnapshot(bytes.NewReader(snap), nil, nil); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDeterminism(t *testing.T) {
	for _, seed := range seeds(t, 3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Logf("seed %d", seed)
			log := randomLog(t, seed, 800)
			a, b := New(modelConfig()), New(modelConfig())
			replay(t, a, log, 1)
			replay(t, b, log, 1)
			mid := New(modelConfig())
			half := len(log) / 2
			replay(t, mid, log[:half], 1)
			c := restore(t, snapshot(t, mid))
			checkInvariants(t, c)
			replay(t, c, log[half:], uint64(half)+1)
			ha, _ := a.GetHash()
			hb, _ := b.GetHash()
			hc, _ := c.GetHash()
			if ha != hb || ha != hc {
				t.Fatalf("hashes differ: fresh %x, fresh %x, recovered mid-log %x", ha, hb, hc)
			}
			sa, sb, sc := snapshot(t, a), snapshot(t, b), snapshot(t, c)
			if !bytes.Equal(sa, sb) || !bytes.Equal(sa, sc) {
				t.Fatal("snapshots differ")
			}
			if st := a.stats(); st.Locks+st.Waiters+st.KVs == 0 {
				t.Fatal("the log left no state: the test proves nothing")
			}
		})
	}
}

// TestSnapshotRoundTrip: recover(save(s)) saves the same bytes, keeps the
// invariants, and answers reads the same way.
func TestSnapshotRoundTrip(t *testing.T) {
	log := randomLog(t, 42, 600)
	s := New(modelConfig())
	replay(t, s, log, 1)
	snap := snapshot(t, s)
	r := restore(t, snap)
	checkInvariants(t, r)
	if !bytes.Equal(snap, snapshot(t, r)) {
		t.Fatal("recover(save(s)) saves different bytes")
	}
	if !reflect.DeepEqual(s.stats(), r.stats()) {
		t.Fatalf("stats differ:\n%+v\n%+v", s.stats(), r.stats())
	}
	for _, p := range modelPaths {
		q := &wire.Request{Op: wire.OpLockInfo, Path: p}
		a, _ := s.Lookup(q)
		b, _ := r.Lookup(q)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s reads differently after recovery:\n%+v\n%+v", p, a, b)
		}
	}
}

func TestRecoverRefusesDamage(t *testing.T) {
	s := New(modelConfig())
	replay(t, s, randomLog(t, 9, 200), 1)
	snap := snapshot(t, s)
	cases := map[string][]byte{
		"empty":     nil,
		"truncated": snap[:len(snap)/2],
		"bad magic": append([]byte("XXXXXXXX"), snap[8:]...),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			r := New(modelConfig())
			if err := r.RecoverFromSnapshot(bytes.NewReader(b), nil, nil); err == nil {
				t.Fatal("damaged snapshot accepted")
			}
		})
	}
	other := testConfig()
	other.ShardID = 99
	if err := New(other).RecoverFromSnapshot(bytes.NewReader(snap), nil, nil); err == nil {
		t.Fatal("a snapshot of another shard was accepted")
	}
}

func TestSnapshotStops(t *testing.T) {
	h := newHarness(t)
	for i := 0; i < 20000; i++ {
		h.sm.trie.Ensure(fmt.Sprintf("/s/n%d", i)).Val.ext = &nodeExt{leader: []byte{}}
	}
	stop := make(chan struct{})
	close(stop)
	var b bytes.Buffer
	if err := h.sm.SaveSnapshot(&b, nil, stop); err != sm.ErrSnapshotStopped {
		t.Fatalf("SaveSnapshot with a closed stop channel: %v", err)
	}
}
