package feed

import (
	"errors"
	"strings"
	"testing"
	"unsafe"

	"github.com/wardenlock/warden/wire"
)

type recordingSub struct {
	got  []wire.Event
	room int // events accepted before refusing (slow consumer); -1 = unlimited
}

func (r *recordingSub) Send(evs []wire.Event) bool {
	if r.room >= 0 && len(r.got)+len(evs) > r.room {
		return false
	}
	r.got = append(r.got, evs...)
	return true
}

func evs(from, to uint64, path string) []wire.Event {
	var out []wire.Event
	for r := from; r <= to; r++ {
		out = append(out, wire.Event{Rev: r, Kind: wire.EvKVPut, Path: path, Value: []byte{byte(r)}})
	}
	return out
}

func TestFeedReplaysFromRevisionThenFollows(t *testing.T) {
	f := New(8, 1<<30)
	f.Append(evs(1, 5, "/a/b/k"))
	sub := &recordingSub{room: -1}
	if _, after, err := f.Subscribe("/a/b", true, 3, sub); err != nil || after != 5 {
		t.Fatalf("subscribe: after=%d err=%v", after, err)
	}
	f.Append(evs(6, 7, "/a/b/k"))
	f.Append(evs(8, 8, "/a/bc")) // a sibling, not under /a/b
	var revs []uint64
	for _, ev := range sub.got {
		revs = append(revs, ev.Rev)
	}
	want := []uint64{3, 4, 5, 6, 7}
	if len(revs) != len(want) {
		t.Fatalf("got revisions %v, want %v", revs, want)
	}
	for i := range want {
		if revs[i] != want[i] {
			t.Fatalf("got revisions %v, want %v", revs, want)
		}
	}
}

func TestFeedReportsCompaction(t *testing.T) {
	f := New(4, 1<<30)
	f.Append(evs(1, 10, "/a/b"))
	_, _, err := f.Subscribe("/a/b", false, 2, &recordingSub{room: -1})
	if !errors.Is(err, wire.ErrCompacted) {
		t.Fatalf("got %v, want Compacted", err)
	}
	var ce *wire.CompactedError
	if !errors.As(err, &ce) || ce.Oldest != 7 {
		t.Fatalf("got %#v, want a CompactedError naming revision 7 the oldest", err)
	}
	if _, _, err := f.Subscribe("/a/b", false, 7, &recordingSub{room: -1}); err != nil {
		t.Fatalf("revision 7 is retained: %v", err)
	}
}

// endingSub records how its watch ended; follows makes it a Follower.
type endingSub struct {
	recordingSub
	follows bool
	ended   wire.Code
	msg     string
}

func (e *endingSub) End(code wire.Code, msg string) { e.ended, e.msg = code, msg }
func (e *endingSub) FollowsMoves() bool             { return e.follows }

// A range moving away ends the watches inside it, except a Follower's,
// which goes on receiving the shard's events.
func TestFeedEndRangeSparesFollowers(t *testing.T) {
	f := New(16, 1<<30)
	plain, follower := &endingSub{recordingSub: recordingSub{room: -1}}, &endingSub{recordingSub: recordingSub{room: -1}, follows: true}
	for _, sub := range []*endingSub{plain, follower} {
		if _, _, err := f.Subscribe("/a/b", true, 0, sub); err != nil {
			t.Fatal(err)
		}
	}
	k, _ := wire.Span("/a/b", 2)
	f.EndRange(k, "", 2)
	f.Append(evs(1, 1, "/a/b/k"))
	if plain.ended != wire.RangeMoving || len(plain.got) != 0 {
		t.Fatalf("plain watch: ended %v with %d events, want RangeMoving and none", plain.ended, len(plain.got))
	}
	if follower.ended != wire.OK || len(follower.got) != 1 {
		t.Fatalf("follower: ended %v with %d events, want still running with 1", follower.ended, len(follower.got))
	}
}

func TestFeedDropsSlowConsumer(t *testing.T) {
	f := New(16, 1<<30)
	slow := &recordingSub{room: 2}
	f.Subscribe("/a/b", false, 0, slow)
	f.Append(evs(1, 2, "/a/b"))
	f.Append(evs(3, 4, "/a/b"))
	if f.Watchers() != 0 {
		t.Fatal("a subscriber that refused events must be dropped")
	}
	f.Append(evs(5, 5, "/a/b"))
	if len(slow.got) != 2 {
		t.Fatalf("dropped subscriber got %d events, want 2", len(slow.got))
	}
}

func TestFeedCopiesValues(t *testing.T) {
	f := New(4, 1<<30)
	sub := &recordingSub{room: -1}
	f.Subscribe("/a/b", false, 0, sub)
	in := evs(1, 1, "/a/b")
	f.Append(in)
	in[0].Value[0] = 99 // the state machine reuses its buffers
	if sub.got[0].Value[0] == 99 {
		t.Fatal("feed kept a reference to the caller's value")
	}
}

func TestFeedGrowsUpToItsCapacity(t *testing.T) {
	f := New(1000, 1<<30)
	f.Append(evs(1, 700, "/a/b"))
	sub := &recordingSub{room: -1}
	if _, _, err := f.Subscribe("/a/b", false, 1, sub); err != nil || len(sub.got) != 700 {
		t.Fatalf("after growing: %d events replayed, err %v", len(sub.got), err)
	}
	f.Append(evs(701, 1500, "/a/b"))
	if len(f.ring) != 1000 {
		t.Fatalf("ring grew to %d, past its capacity", len(f.ring))
	}
	if _, _, err := f.Subscribe("/a/b", false, 400, &recordingSub{room: -1}); !errors.Is(err, wire.ErrCompacted) {
		t.Fatalf("revision 400 must be compacted once 1500 events passed a 1000-event ring: %v", err)
	}
	if _, _, err := f.Subscribe("/a/b", false, 501, &recordingSub{room: -1}); err != nil {
		t.Fatalf("revision 501 is retained: %v", err)
	}
}

// history serves events from a slice, as the audit store would.
func historyOf(stored []wire.Event) History {
	return func(from, to uint64, limit int) ([]wire.Event, error) {
		var out []wire.Event
		for _, ev := range stored {
			if ev.Rev >= from && ev.Rev <= to {
				out = append(out, ev)
			}
		}
		return out, nil
	}
}

func TestFeedResumesFromHistory(t *testing.T) {
	cases := []struct {
		name   string
		stored []wire.Event // what the store kept
		ring   []wire.Event // what the ring holds (after a restart: the replayed tail)
		from   uint64
		want   []uint64
		code   wire.Code
	}{
		{"older than the ring", evs(1, 10, "/a/b"), evs(8, 12, "/a/b"), 3, []uint64{3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, wire.OK},
		{"empty ring after a restart", evs(1, 10, "/a/b"), nil, 9, []uint64{9, 10}, wire.OK}, // recovered at revision 10
		{"history short of the snapshot recovered", evs(1, 6, "/a/b"), nil, 5, nil, wire.Compacted},
		{"from the future", evs(1, 10, "/a/b"), nil, 20, nil, wire.OK},
		{"gap in the store", append(evs(1, 3, "/a/b"), evs(5, 7, "/a/b")...), evs(8, 9, "/a/b"), 2, nil, wire.Compacted},
		{"store ends before the ring", evs(1, 5, "/a/b"), evs(8, 9, "/a/b"), 2, nil, wire.Compacted},
		{"nothing stored", nil, evs(8, 9, "/a/b"), 2, nil, wire.Compacted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := New(4, 1<<30)
			f.History = historyOf(tc.stored)
			if tc.ring == nil {
				f.Skip(10) // the replica restarted from its snapshot at revision 10
			}
			f.Append(tc.ring)
			sub := &recordingSub{room: -1}
			_, _, err := f.Subscribe("/a/b", false, tc.from, sub)
			if tc.code != wire.OK {
				var we *wire.Error
				var ge *GapError
				if !errors.As(err, &we) || we.Code != tc.code || !errors.As(err, &ge) {
					t.Fatalf("got %v, want a GapError that a client reads as %v", err, tc.code)
				}
				if len(sub.got) != 0 {
					t.Fatalf("a refused watch was sent %d events", len(sub.got))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var revs []uint64
			for _, ev := range sub.got {
				revs = append(revs, ev.Rev)
			}
			if len(revs) != len(tc.want) {
				t.Fatalf("replayed %v, want %v", revs, tc.want)
			}
			for i := range revs {
				if revs[i] != tc.want[i] {
					t.Fatalf("replayed %v, want %v", revs, tc.want)
				}
			}
		})
	}
}

// The ring keeps within its byte budget, dropping the oldest events, and a
// watch from a dropped revision is told Compacted (resumable elsewhere).
func TestFeedStaysWithinItsBytes(t *testing.T) {
	const budget = 64 << 10
	f := New(1<<20, budget)
	long := "/a/b/" + strings.Repeat("k", 200)
	for r := uint64(1); r <= 5000; r++ {
		f.Append(evs(r, r, long))
		if used := len(f.ring)*eventSize + f.bytes; used > budget {
			t.Fatalf("after %d events the ring uses %d bytes, budget %d", r, used, budget)
		}
	}
	if f.n < 100 || f.at(f.n-1).Rev != 5000 {
		t.Fatalf("ring holds %d events ending at %d; want the newest ones", f.n, f.at(f.n-1).Rev)
	}
	if _, _, err := f.Subscribe("/a/b", true, 1, &recordingSub{room: -1}); !errors.Is(err, wire.ErrCompacted) {
		t.Fatalf("watch from a dropped revision: %v, want Compacted", err)
	}
}

// Events in the ring do not point into the caller's memory: the state
// machine's decoded strings are substrings of whole Raft entries, which the
// ring must not keep alive.
func TestFeedEventsDoNotPinTheirSource(t *testing.T) {
	entry := strings.Repeat("x", 1<<16) + "/a/b/kowner"
	path, owner := entry[1<<16:1<<16+6], entry[1<<16+6:]
	value := []byte(entry)[:4]
	f := New(8, 1<<30)
	sub := &recordingSub{room: -1}
	if _, _, err := f.Subscribe("/a", true, 0, sub); err != nil {
		t.Fatal(err)
	}
	f.Append([]wire.Event{{Rev: 1, Path: path, Owner: owner, Value: value}})
	inEntry := func(p *byte) bool {
		lo := uintptr(unsafe.Pointer(unsafe.StringData(entry)))
		return uintptr(unsafe.Pointer(p)) >= lo && uintptr(unsafe.Pointer(p)) < lo+uintptr(len(entry))
	}
	for _, ev := range []wire.Event{f.at(0), sub.got[0]} {
		if ev.Path != path || ev.Owner != owner || string(ev.Value) != "xxxx" {
			t.Fatalf("event %+v, want the appended one", ev)
		}
		if inEntry(unsafe.StringData(ev.Path)) || inEntry(unsafe.StringData(ev.Owner)) || &ev.Value[0] == &value[0] {
			t.Fatal("the feed's event points into the appended event's memory")
		}
	}
}

// BenchmarkFeedAppend: what retaining an applied batch costs, as the state
// machine hands it over (grants with a path and an owner that point into
// one decoded entry), with one watcher. Reports the bytes the ring holds
// per event once full.
func BenchmarkFeedAppend(b *testing.B) {
	entry := strings.Repeat("/bench/m0123/k0123456-0123456789abcdef-a1b2c3", 64)
	batch := make([]wire.Event, 64)
	for i := range batch {
		seg := entry[i*45 : (i+1)*45]
		batch[i] = wire.Event{Kind: wire.EvAcquired, Path: seg[:21], Owner: seg[22:]}
	}
	f := New(65536, 4<<20)
	if _, _, err := f.Subscribe("/bench", true, 0, &discardSub{}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	rev := uint64(0)
	for b.Loop() {
		for i := range batch {
			rev++
			batch[i].Rev = rev
		}
		f.Append(batch)
	}
	b.ReportMetric(float64(len(f.ring)*eventSize+f.bytes)/float64(f.n), "ring-B/event")
}

type discardSub struct{}

func (discardSub) Send([]wire.Event) bool { return true }

// TestFeedDeliveryReusesItsSlices: fanning an append out to a prefix watch
// and to a watch of everything allocates nothing per append (the matched
// events go out in a reused slice, and a watch of "/" gets the appended
// batch itself), and each subscriber still gets exactly its events.
func TestFeedDeliveryReusesItsSlices(t *testing.T) {
	f := New(1<<16, 1<<30)
	under, all := &recordingSub{room: -1}, &recordingSub{room: -1}
	for _, s := range []struct {
		path string
		sub  *recordingSub
	}{{"/a", under}, {"/", all}} {
		if _, _, err := f.Subscribe(s.path, true, 0, s.sub); err != nil {
			t.Fatal(err)
		}
	}
	rev := uint64(0)
	batch := func() []wire.Event {
		rev += 2
		return []wire.Event{{Rev: rev - 1, Kind: wire.EvKVPut, Path: "/a/x"}, {Rev: rev, Kind: wire.EvKVPut, Path: "/b/y"}}
	}
	f.Append(batch())
	f.Append(batch())
	if len(under.got) != 2 || under.got[0].Rev != 1 || under.got[1].Rev != 3 || under.got[1].Path != "/a/x" {
		t.Fatalf("the /a watch got %+v, want revisions 1 and 3 on /a/x", under.got)
	}
	if len(all.got) != 4 || all.got[3].Rev != 4 || all.got[3].Path != "/b/y" {
		t.Fatalf("the / watch got %+v, want revisions 1 to 4", all.got)
	}
	g := New(1<<16, 1<<30)
	for _, path := range []string{"/a", "/"} {
		if _, _, err := g.Subscribe(path, true, 0, discardSub{}); err != nil {
			t.Fatal(err)
		}
	}
	b := batch()
	g.Append(b)
	if n := testing.AllocsPerRun(200, func() { g.Append(b) }); n >= 1 {
		t.Fatalf("%.1f allocations per append with two watches, want none", n)
	}
}

// TestFeedSkipEndsWatchesAndRefusesTheGap: a replica that catches up from
// a snapshot never applies the entries it covers, so its feed never sees
// their events. Skip ends the live watches (Unavailable, resumable
// elsewhere), and a watch from a revision before the snapshot is refused
// with a GapError (the router then asks another replica), from the ring's
// old revisions and from the skipped ones alike; a watch from now, or
// from after the snapshot, follows the new events.
func TestFeedSkipEndsWatchesAndRefusesTheGap(t *testing.T) {
	f := New(64, 1<<30)
	f.History = historyOf(evs(1, 5, "/a/b")) // the node's history ends where it stopped applying
	f.Append(evs(1, 5, "/a/b"))
	live := &endingSub{recordingSub: recordingSub{room: -1}}
	if _, _, err := f.Subscribe("/a/b", false, 0, live); err != nil {
		t.Fatal(err)
	}
	f.Skip(40)
	if live.ended != wire.Unavailable || !strings.Contains(live.msg, "6 to 40") {
		t.Fatalf("live watch ended with %v %q, want Unavailable naming the skipped revisions", live.ended, live.msg)
	}
	for _, rev := range []uint64{3, 6, 40} {
		var ge *GapError
		if _, _, err := f.Subscribe("/a/b", false, rev, &recordingSub{room: -1}); !errors.As(err, &ge) {
			t.Fatalf("watch from revision %d after the skip: %v, want a GapError", rev, err)
		}
	}
	now := &recordingSub{room: -1}
	_, start, err := f.Subscribe("/a/b", false, 0, now)
	if err != nil || start != 40 {
		t.Fatalf("watch from now: start %d, %v; want after 40", start, err)
	}
	f.Append(evs(41, 42, "/a/b"))
	after := &recordingSub{room: -1}
	if _, _, err := f.Subscribe("/a/b", false, 41, after); err != nil {
		t.Fatal(err)
	}
	f.Append(evs(43, 43, "/a/b"))
	if len(now.got) != 3 || now.got[0].Rev != 41 || len(after.got) != 3 || after.got[0].Rev != 41 {
		t.Fatalf("after the skip: from now got %v, from 41 got %v", now.got, after.got)
	}
	if len(live.got) != 0 {
		t.Fatalf("the ended watch was sent %d events", len(live.got))
	}
	f.Skip(30) // an older snapshot changes nothing
	if _, _, err := f.Subscribe("/a/b", false, 42, &recordingSub{room: -1}); err != nil {
		t.Fatalf("watch from 42 after a stale skip: %v", err)
	}
}
