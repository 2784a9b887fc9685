package statemachine

import (
	"testing"

	"github.com/wardenlock/warden/wire"
)

func campaign(path string, lease uint64, owner, value string) *wire.Request {
	return &wire.Request{Op: wire.OpCampaign, Path: path, Lease: lease, Owner: owner, Value: []byte(value),
		Wait: wire.WaitForever, TTL: 5000}
}

func TestElection(t *testing.T) {
	h := newHarness(t)
	h.expect(&wire.Request{Op: wire.OpLeader, Path: "/e/x"}, wire.UnknownOp) // a read, not a log op
	if r := h.read(&wire.Request{Op: wire.OpLeader, Path: "/e/x"}); r.Code != wire.NotFound {
		t.Fatalf("leader of an empty election: %v", r.Code)
	}
	a := h.mustOK(campaign("/e/x", 1, "a", "host-a"))
	h.expect(with(campaign("/e/x", 2, "b", "host-b"), 8, 1), wire.Queued)
	if r := h.mustOK(campaign("/e/x", 1, "a", "host-a")); r.Token != a.Token || r.Count != 1 {
		t.Fatalf("campaigning again changed leadership: %+v", r)
	}
	l := h.read(&wire.Request{Op: wire.OpLeader, Path: "/e/x"})
	if string(l.Value) != "host-a" || l.Token != a.Token || l.Owner != "a" {
		t.Fatalf("leader %+v", l)
	}
	h.events = nil
	h.mustOK(&wire.Request{Op: wire.OpProclaim, Path: "/e/x", Token: a.Token, Value: []byte("host-a2")})
	if ev := h.events[0]; ev.Kind != wire.EvLeader || ev.Cause != wire.CauseProclaim || string(ev.Value) != "host-a2" {
		t.Fatalf("proclaim event %+v", ev)
	}
	h.expect(&wire.Request{Op: wire.OpProclaim, Path: "/e/x", Token: a.Token + 100}, wire.NotHolder)
	h.events = nil
	r := h.mustOK(&wire.Request{Op: wire.OpResign, Path: "/e/x", Token: a.Token})
	if len(r.Grants) != 1 || r.Grants[0].Seq != 1 {
		t.Fatalf("resign did not hand leadership over: %+v", r.Grants)
	}
	last := h.events[len(h.events)-1]
	if last.Kind != wire.EvLeader || string(last.Value) != "host-b" || last.Token != r.Grants[0].Token {
		t.Fatalf("no leader event for the successor: %+v", last)
	}
	h.expect(&wire.Request{Op: wire.OpProclaim, Path: "/e/x", Token: a.Token}, wire.StaleToken)
	if l := h.read(&wire.Request{Op: wire.OpLeader, Path: "/e/x"}); string(l.Value) != "host-b" {
		t.Fatalf("leader after hand-over %+v", l)
	}
}
