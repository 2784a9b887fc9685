package statemachine

import (
	"testing"

	sm "github.com/lni/dragonboat/v4/statemachine"
	"github.com/wardenlock/warden/wire"
)

func TestBatchAnswersEachOpInOrder(t *testing.T) {
	h := newHarness(t)
	ops := []*wire.Request{
		{ID: 1, Op: wire.OpAcquire, Path: "/l/a", Lease: 1, TTL: 5000},
		{ID: 2, Op: wire.OpAcquire, Path: "/l/a", Lease: 2, TTL: 5000},
		{ID: 3, Op: wire.OpAcquire, Path: "bad", Lease: 2, TTL: 5000},
		{ID: 4, Op: wire.OpAcquire, Path: "/l/b", Lease: 2, TTL: 5000},
	}
	cmd, _ := EncodeCommand(nil, h.now, ops)
	h.index++
	res, err := h.sm.Update(sm.Entry{Index: h.index, Cmd: cmd})
	if err != nil || res.Value != 4 {
		t.Fatalf("Update = %d, %v", res.Value, err)
	}
	out, _ := DecodeResults(res.Data)
	want := []wire.Code{wire.OK, wire.Conflict, wire.InvalidArgument, wire.OK}
	for i, r := range out {
		if r.ID != uint64(i+1) || r.Code != want[i] {
			t.Fatalf("op %d: id %d code %v, want id %d code %v", i, r.ID, r.Code, i+1, want[i])
		}
	}
}

func TestMalformedEntries(t *testing.T) {
	good, _ := EncodeCommand(nil, 5, []*wire.Request{acq("/l/a", ex, 1, "o")})
	cases := map[string][]byte{
		"empty":          {},
		"one byte":       {1},
		"bad version":    append([]byte{9}, good[1:]...),
		"bad kind":       append([]byte{1, 9}, good[2:]...),
		"truncated":      good[:len(good)-3],
		"trailing bytes": append(append([]byte{}, good...), 0xc0),
		"huge count":     {1, 1, 0x05, 0xdd, 0x7f, 0xff, 0xff, 0xff},
	}
	for name, cmd := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			before := snapshot(t, h.sm)
			h.index++
			res, err := h.sm.Update(sm.Entry{Index: h.index, Cmd: cmd})
			if err != nil || res.Value != 0 {
				t.Fatalf("Update = %d, %v", res.Value, err)
			}
			out, err := DecodeResults(res.Data)
			if err != nil || len(out) != 1 || out[0].Code != wire.Malformed {
				t.Fatalf("results %+v, %v", out, err)
			}
			h.sm.applied-- // the index is the only thing a bad entry may change
			if string(before) != string(snapshot(t, h.sm)) {
				t.Fatal("a malformed entry changed state")
			}
		})
	}
}

func TestEncodeCommandRefusesNil(t *testing.T) {
	if _, err := EncodeCommand(nil, 1, []*wire.Request{nil}); err == nil {
		t.Fatal("nil op encoded")
	}
}

func TestObserverSeesEachEntry(t *testing.T) {
	h := newHarness(t)
	var calls []uint64
	h.sm.SetObserver(observerFunc(func(i uint64, evs []wire.Event) { calls = append(calls, i) }))
	h.mustOK(acq("/l/a", ex, 1, "o"))                // events
	h.expect(acq("/l/a", ex, 1, "p"), wire.Conflict) // no events: no call
	if len(calls) != 1 || calls[0] != h.index-1 {
		t.Fatalf("observer calls %v (index now %d)", calls, h.index)
	}
}

type observerFunc func(uint64, []wire.Event)

func (f observerFunc) Applied(i uint64, evs []wire.Event) { f(i, evs) }

func TestConfig(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("zero config must be valid (defaults): %v", err)
	}
	bad := []Config{{MinTTL: -1}, {MinTTL: 5000, MaxTTL: 10}, {MaxWaiters: -3}, {TombstoneMs: -1}}
	for _, c := range bad {
		if c.Validate() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if d := (Config{}).withDefaults(); d.SplitDepth != 2 || d.MaxValue != 4096 || d.MinTTL != 1000 {
		t.Fatalf("defaults %+v", d)
	}
}
