package statemachine

import (
	"testing"

	"github.com/wardenlock/warden/hierarchy"
	"github.com/wardenlock/warden/wire"
)

func TestRanges(t *testing.T) {
	k := hierarchy.RouteKey("/l/a")
	point := []wire.Range{{Start: k, End: k + "\x00", Shard: 7}, {Start: "", End: k, Shard: 8}}
	fromStart := []wire.Range{{Start: "", End: k + "\x00", Shard: 7}}
	cases := []struct {
		name   string
		ranges []wire.Range
		path   string
		want   wire.Code
	}{
		{"owned namespace", point, "/l/a/job", wire.OK},
		{"the namespace itself", point, "/l/a", wire.OK},
		{"other namespace", point, "/l/b/job", wire.WrongShard},
		{"shallow path, start not owned", point, "/l", wire.WrongShard},
		{"shallow path, start owned, rest not", fromStart, "/l", wire.SpansRanges},
		{"everything owned", []wire.Range{{Shard: 7}}, "/", wire.OK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.mustOK(&wire.Request{Op: wire.OpSetRanges, Gen: 3, Ranges: tc.ranges})
			r := h.expect(acq(tc.path, sh, 0, ""), tc.want)
			if tc.want == wire.WrongShard && (r.Hint == nil || r.Hint.Shard != 7 || r.Hint.Gen != 3) {
				t.Fatalf("hint %+v", r.Hint)
			}
			if rd := h.read(&wire.Request{Op: wire.OpLockInfo, Path: tc.path}); tc.want != wire.OK && rd.Code != tc.want {
				t.Fatalf("reads must check ranges too: %v", rd.Code)
			}
			h.expect(&wire.Request{Op: wire.OpSetRanges, Gen: 2}, wire.InvalidArgument) // generations never go back
		})
	}
}

func TestFreshStateMachineOwnsNothing(t *testing.T) {
	s := New(testConfig())
	h := &harness{t: t, sm: s, now: 1}
	if r := h.do(acq("/l/a", ex, 0, "")); r.Code != wire.WrongShard {
		t.Fatalf("fresh state machine answered %v", r.Code)
	}
}

// TestRouteCheckHoldsForOneOp: the route check of an op's path is reused
// by that op alone (its own path check, its range's load count), never by
// a later op after the ranges changed, even within one entry.
func TestRouteCheckHoldsForOneOp(t *testing.T) {
	h := newHarness(t)
	ka, kb := hierarchy.RouteKey("/l/a"), hierarchy.RouteKey("/l/b")
	both := []wire.Range{{Start: ka, End: ka + "\x00", Shard: 7}, {Start: kb, End: kb + "\x00", Shard: 7}}
	h.mustOK(&wire.Request{Op: wire.OpSetRanges, Gen: 2, Ranges: both})
	onlyB := []wire.Range{{Start: kb, End: kb + "\x00", Shard: 7}}
	got := h.entry(acq("/l/a/x", sh, 1, "o"), acq("/l/b/x", sh, 1, "o"), acq("/l/b/y", sh, 1, "o"),
		&wire.Request{Op: wire.OpSetRanges, Gen: 3, Ranges: onlyB}, acq("/l/a/x", sh, 2, "p"))
	want := []wire.Code{wire.OK, wire.OK, wire.OK, wire.OK, wire.WrongShard}
	for i, r := range got {
		if r.Code != want[i] {
			t.Fatalf("op %d: %v (%s), want %v", i, r.Code, r.Msg, want[i])
		}
	}
	h.mustOK(&wire.Request{Op: wire.OpSetRanges, Gen: 4, Ranges: both})
	h.entry(acq("/l/b/z", sh, 1, "o"), acq("/l/a/z", sh, 1, "o"), acq("/l/b/w", sh, 1, "o"))
	v, err := h.sm.Lookup(RangeLoadQuery{})
	if err != nil {
		t.Fatal(err)
	}
	// /l/a's range is new since gen 4; /l/b's kept its two earlier ops.
	byStart := map[string]uint64{}
	for i, rg := range v.(RangeLoad).Ranges {
		byStart[rg.Start] = v.(RangeLoad).Ops[i]
	}
	if byStart[ka] != 1 || byStart[kb] != 4 {
		t.Fatalf("ops per range: /l/a %d, /l/b %d; want 1 and 4", byStart[ka], byStart[kb])
	}
	// The last routed op was in the second range; then the shard owns all.
	second := "/l/a/v"
	if ka < kb {
		second = "/l/b/v"
	}
	h.entry(acq(second, sh, 1, "o"), &wire.Request{Op: wire.OpSetRanges, Gen: 5, Ranges: []wire.Range{{Shard: 7}}},
		acq("/l/c/x", sh, 1, "o")) // the harness fails on a fault
}
