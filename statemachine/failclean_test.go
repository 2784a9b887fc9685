package statemachine

import (
	"bytes"
	"strings"
	"testing"

	sm "github.com/lni/dragonboat/v4/statemachine"
	"github.com/wardenlock/warden/wire"
)

// An op that the state machine refuses changes nothing: applied in an entry
// of its own, it leaves the replica's snapshot byte-identical to that of a
// twin which applied an entry holding only a no-op at the same index and
// stamped time.
func TestRefusedOpsLeaveStateUntouched(t *testing.T) {
	h := newHarness(t)
	h.mustOK(&wire.Request{Op: wire.OpSession, Lease: 5, TTL: 30000})
	h.mustOK(&wire.Request{Op: wire.OpSession, Lease: 6, TTL: 30000})
	held := h.mustOK(acq("/a/x", wire.Exclusive, 5, "one"))
	h.mustOK(acq("/a/s", wire.Shared, 5, "one"))
	h.mustOK(acq("/a/s", wire.Shared, 6, "two"))
	h.do(wait(acq("/a/x", wire.Exclusive, 6, "two"))) // queues
	h.mustOK(&wire.Request{Op: wire.OpKVPut, Path: "/a/k", Value: []byte("v"), Lease: 5})
	h.mustOK(&wire.Request{Op: wire.OpCampaign, Path: "/a/e", Lease: 5, Value: []byte("c")})

	refused := []*wire.Request{
		rel("/a/x", held.Token+1000),                                   // another token
		rel("/a/none", 1),                                              // nothing held
		acq("/a/x", wire.Exclusive, 6, "two"),                          // held, try only
		acq("/a/s", wire.Exclusive, 5, "one"),                          // upgrade with another sharer
		acq("no-slash", wire.Exclusive, 5, "one"),                      // bad path
		acq("/a/"+strings.Repeat("p", 5000), wire.Exclusive, 5, "one"), // too long
		acq("/a/m", wire.Mode(77), 5, "one"),                           // no such mode
		{Op: wire.OpAcquireMulti, Paths: []string{"/a/m1", "/a/x"}, Mode: wire.Exclusive, Lease: 6, Owner: "two"}, // one is held
		{Op: wire.OpRenew, Path: "/a/x", Token: held.Token + 7, TTL: 1000},
		{Op: wire.OpKVPut, Path: "/a/k", Value: []byte("w"), Flags: wire.FlagHasExpect, Version: 99},
		{Op: wire.OpKVPut, Path: "/a/k2", Value: []byte("w"), Lease: 42},
		{Op: wire.OpKVDelete, Path: "/a/k", Flags: wire.FlagHasExpect, Version: 99},
		{Op: wire.OpProclaim, Path: "/a/e", Token: 12345, Value: []byte("d")},
		{Op: wire.OpResign, Path: "/a/e", Token: 12345},
		{Op: wire.OpHandOver, Path: "/a/e", Token: 12345, Target: "two"},
		{Op: wire.OpRevokeLock, Path: "/a/x", Token: held.Token + 3},
		{Op: wire.OpSession, Lease: 7, TTL: 1},
		{Op: wire.Op(250), Path: "/a/x"},
	}
	for _, r := range refused {
		t.Run(r.Op.String()+" "+shortPath(r.Path), func(t *testing.T) {
			base := snapshot(t, h.sm)
			got, want := twin(t, base), twin(t, base)
			idx := h.index + 1
			out := applyAt(t, got, idx, h.now, r)
			if out.Code == wire.OK {
				t.Fatalf("%v %s was granted; this test wants refused ops", r.Op, r.Path)
			}
			applyAt(t, want, idx, h.now, &wire.Request{Op: wire.OpNoop})
			if a, b := snapshot(t, got), snapshot(t, want); !bytes.Equal(a, b) {
				t.Fatalf("%v %s (refused %v: %s) changed the state", r.Op, r.Path, out.Code, out.Msg)
			}
		})
	}
}

func shortPath(p string) string {
	if len(p) > 12 {
		return p[:12]
	}
	return p
}

func twin(t *testing.T, snap []byte) *StateMachine {
	s := New(testConfig())
	if err := s.RecoverFromSnapshot(bytes.NewReader(snap), nil, nil); err != nil {
		t.Fatal(err)
	}
	return s
}

func applyAt(t *testing.T, s *StateMachine, index uint64, now int64, r *wire.Request) wire.Response {
	t.Helper()
	cmd, err := EncodeCommand(nil, now, []*wire.Request{r})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Update(sm.Entry{Index: index, Cmd: cmd})
	if err != nil {
		t.Fatal(err)
	}
	out, err := DecodeResults(res.Data)
	if err != nil || len(out) != 1 {
		t.Fatalf("results %v, %v", out, err)
	}
	return out[0]
}

// A panic inside an op (here a bug planted by breaking the client table)
// stops the replica: Update panics, naming the entry and the op, instead
// of answering Internal and applying the rest of the entry past a
// half-applied op.
func TestPanicInAnOpStopsTheReplica(t *testing.T) {
	h := newHarness(t)
	h.sm.clients = nil // touchClient now writes to a nil map
	cmd, err := EncodeCommand(nil, h.now, []*wire.Request{with(acq("/a/x", wire.Exclusive, 0, "one"), 1, 1), {Op: wire.OpNoop}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		p := recover()
		msg, _ := p.(string)
		if !strings.Contains(msg, "entry 2") || !strings.Contains(msg, `"/a/x"`) {
			t.Fatalf("Update panicked with %v, want the entry and the op named", p)
		}
	}()
	h.sm.Update(sm.Entry{Index: 2, Cmd: cmd})
	t.Fatal("Update returned after a panic inside an op")
}
