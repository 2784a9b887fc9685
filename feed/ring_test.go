package feed

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/wardenlock/warden/wire"
)

// The collector scans no ring slot: a field that points (a string, a
// slice) would make every ring memory it must mark on every cycle.
func TestFeedSlotHoldsNoPointers(t *testing.T) {
	var walk func(reflect.Type, string)
	walk = func(ty reflect.Type, at string) {
		switch ty.Kind() {
		case reflect.Struct:
			for i := 0; i < ty.NumField(); i++ {
				walk(ty.Field(i).Type, at+"."+ty.Field(i).Name)
			}
		case reflect.Array:
			walk(ty.Elem(), at+"[]")
		case reflect.String, reflect.Slice, reflect.Pointer, reflect.Map, reflect.Chan,
			reflect.Func, reflect.Interface, reflect.UnsafePointer:
			t.Errorf("slot%s is a %s", at, ty.Kind())
		}
	}
	walk(reflect.TypeFor[slot](), "")
}

// What goes in comes back out, field by field, whatever the value's size
// (small ones share a chunk, large ones get their own) and whether it was
// nil or empty; and once the ring drops events, the arena forgets the
// chunks only they used.
func TestFeedRingKeepsEventsAndReleasesChunks(t *testing.T) {
	const budget = 256 << 10
	f := New(1<<20, budget)
	big := bytes.Repeat([]byte("v"), arenaChunk/4)
	event := func(r uint64) wire.Event {
		ev := wire.Event{Rev: r, Kind: wire.EvAcquired, Cause: wire.CauseHandOff, Mode: wire.Mode(r % 3),
			Path: fmt.Sprintf("/ns/k%06d", r), Token: r * 3, Lease: r * 5, Owner: strings.Repeat("o", int(r%7)),
			Version: r * 7, Client: r * 11, Seq: r * 13, Shard: 4, Time: int64(r) * 17, TTL: int64(r) * 19}
		switch r % 4 {
		case 1:
			ev.Value = []byte{}
		case 2:
			ev.Value = []byte(fmt.Sprint("value ", r))
		case 3:
			ev.Value = big
		}
		return ev
	}
	maxChunks := 0
	for r := uint64(1); r <= 20000; r++ {
		f.Append([]wire.Event{event(r)})
		maxChunks = max(maxChunks, len(f.arena.chunks))
	}
	if f.n < 10 || f.revAt(f.n-1) != 20000 {
		t.Fatalf("ring holds %d events ending at %d", f.n, f.revAt(f.n-1))
	}
	for i := 0; i < f.n; i++ {
		got, want := f.at(i), event(f.revAt(i))
		if !reflect.DeepEqual(got, want) || (got.Value == nil) != (want.Value == nil) {
			t.Fatalf("event %d came back as %+v, want %+v", want.Rev, got, want)
		}
	}
	// The retained bytes are within the budget; the chunks holding them
	// (each large value its own, the small ones 64 KiB) cannot exceed
	// budget/(arenaChunk/8) + 2 unless released chunks stay listed.
	if limit := budget/(arenaChunk/8) + 2; maxChunks > limit {
		t.Fatalf("the arena listed up to %d chunks, want at most %d: chunks no slot uses are kept", maxChunks, limit)
	}
}
