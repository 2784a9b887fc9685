package statemachine

import (
	"testing"

	"github.com/wardenlock/warden/wire"
)

func checkpoint(term uint64, ids []uint64, rem []int64) *wire.Request {
	return &wire.Request{Op: wire.OpCheckpoint, Term: term, Leases: ids, Remaining: rem}
}

func leaseInfos(t *testing.T, s *StateMachine) map[uint64]LeaseInfo {
	t.Helper()
	v, err := s.Lookup(LeasesQuery{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]LeaseInfo{}
	for _, in := range v.([]LeaseInfo) {
		out[in.ID] = in
	}
	return out
}

func leaseStates(t *testing.T, s *StateMachine, ids ...uint64) []LeaseState {
	t.Helper()
	v, err := s.Lookup(LeaseCheck{IDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	return v.([]LeaseState)
}

// TestCheckpointLifecycle: a checkpoint is what a new leader reads; it is
// cleared by the lessor (negative remaining), by a renewal through the log
// and by the lease's end, and a keepalive check reports it.
func TestCheckpointLifecycle(t *testing.T) {
	h := newHarness(t)
	sess := acq("/a/b/c", wire.Exclusive, 7, "")
	sess.TTL = 5000
	h.mustOK(sess)
	single := acq("/a/b/d", wire.Exclusive, 0, "")
	single.TTL = 4000
	g := h.mustOK(single)
	singleID := g.Lease
	if singleID&SingleLeaseBit == 0 {
		t.Fatalf("a lease-less acquire made lease %#x", singleID)
	}

	h.mustOK(&wire.Request{Op: wire.OpNoop, Term: 2})
	resp := h.mustOK(checkpoint(2, []uint64{7, singleID, 99}, []int64{1200, 800, 500}))
	if resp.Count != 2 {
		t.Fatalf("checkpoint recorded %d leases, want 2 (99 does not exist)", resp.Count)
	}
	infos := leaseInfos(t, h.sm)
	if infos[7].Checkpoint != 1200 || infos[singleID].Checkpoint != 800 {
		t.Fatalf("lease infos after checkpoint: %+v", infos)
	}
	if st := leaseStates(t, h.sm, 7, singleID, 99); st[0] != LeaseCheckpointed || st[1] != LeaseCheckpointed || st[2] != LeaseUnknown {
		t.Fatalf("lease states %v", st)
	}
	if _, ok := h.sm.checkpoints[99]; ok {
		t.Fatal("a checkpoint of an unknown lease was stored")
	}

	// The lessor clears a checkpoint before it acknowledges a keepalive.
	h.mustOK(checkpoint(2, []uint64{7}, []int64{-1}))
	if in := leaseInfos(t, h.sm)[7]; in.Checkpoint != -1 {
		t.Fatalf("cleared checkpoint still reads %d", in.Checkpoint)
	}
	if st := leaseStates(t, h.sm, 7); st[0] != LeaseAlive {
		t.Fatalf("lease 7 state %v after the clear, want alive", st[0])
	}

	// A renewal through the log is a full TTL: the checkpoint goes.
	h.mustOK(&wire.Request{Op: wire.OpRenew, Path: "/a/b/d", Token: g.Token, TTL: 4000})
	if in := leaseInfos(t, h.sm)[singleID]; in.Checkpoint != -1 {
		t.Fatalf("a renewed single lease kept checkpoint %d", in.Checkpoint)
	}

	// The lease's end drops it too.
	h.mustOK(checkpoint(2, []uint64{7, singleID}, []int64{300, 300}))
	h.mustOK(rel("/a/b/d", g.Token))
	h.mustOK(revoke(7))
	if len(h.sm.checkpoints) != 0 {
		t.Fatalf("checkpoints of ended leases remain: %v", h.sm.checkpoints)
	}
}

// A deposed leader's checkpoint reaching the log after the new leader's term
// marker is refused: it could undo a clear the new leader made before it
// acknowledged a keepalive.
func TestCheckpointFromDeposedLeaderRefused(t *testing.T) {
	h := newHarness(t)
	r := acq("/a/b/c", wire.Exclusive, 7, "")
	r.TTL = 5000
	h.mustOK(r)
	h.mustOK(&wire.Request{Op: wire.OpNoop, Term: 4})
	h.expect(checkpoint(3, []uint64{7}, []int64{100}), wire.Conflict)
	if in := leaseInfos(t, h.sm)[7]; in.Checkpoint != -1 {
		t.Fatalf("a term-3 checkpoint was recorded after term 4 began: %d", in.Checkpoint)
	}
	h.mustOK(checkpoint(4, []uint64{7}, []int64{100}))
	h.expect(checkpoint(4, []uint64{7, 8}, []int64{100}), wire.InvalidArgument)
}

// TestCheckpointsSurviveSnapshots: the section round-trips, so a replica
// restored from a snapshot answers a new leader the same way.
func TestCheckpointsSurviveSnapshots(t *testing.T) {
	h := newHarness(t)
	for _, id := range []uint64{3, 5, 9} {
		r := acq("/a/b/"+string(rune('a'+id)), wire.Exclusive, id, "")
		r.TTL = 5000
		h.mustOK(r)
	}
	h.mustOK(checkpoint(0, []uint64{9, 3}, []int64{700, 1500}))
	var snap1 = snapshotBytes(t, h.sm)
	got := New(testConfig())
	if err := got.RecoverFromSnapshot(bytesReader(snap1), nil, nil); err != nil {
		t.Fatal(err)
	}
	infos := leaseInfos(t, got)
	if infos[3].Checkpoint != 1500 || infos[9].Checkpoint != 700 || infos[5].Checkpoint != -1 {
		t.Fatalf("restored checkpoints: %+v", infos)
	}
	if snap2 := snapshotBytes(t, got); string(snap1) != string(snap2) {
		t.Fatal("a restored replica writes a different snapshot")
	}
	h1, _ := h.sm.GetHash()
	h2, _ := got.GetHash()
	if h1 != h2 {
		t.Fatalf("hashes differ after restore: %x vs %x", h1, h2)
	}
}

func snapshotBytes(t *testing.T, s *StateMachine) []byte {
	t.Helper()
	var b []byte
	w := &byteSink{&b}
	if err := s.SaveSnapshot(w, nil, nil); err != nil {
		t.Fatal(err)
	}
	return b
}

type byteSink struct{ b *[]byte }

func (w *byteSink) Write(p []byte) (int, error) { *w.b = append(*w.b, p...); return len(p), nil }
