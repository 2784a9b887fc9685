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
