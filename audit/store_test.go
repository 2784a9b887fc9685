package audit

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble"

	"github.com/wardenlock/warden/internal/diskfs/crashfs"
	"github.com/wardenlock/warden/wire"
)

func open(t *testing.T, o Options) *Store {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	o.SweepEvery = time.Hour // tests sweep by hand
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var t0 = time.Date(2026, 11, 21, 3, 0, 0, 0, time.UTC)

func ev(shard, rev uint64, kind wire.EventKind, cause wire.Cause, path string, token uint64, owner string, at time.Duration) wire.Event {
	return wire.Event{Shard: shard, Rev: rev, Kind: kind, Cause: cause, Path: path, Token: token, Owner: owner,
		Time: t0.Add(at).UnixMilli()}
}

func TestFindByPrefixTokenAndTime(t *testing.T) {
	s := open(t, Options{})
	s.Record(2, []wire.Event{
		ev(2, 1, wire.EvAcquired, wire.CauseDirect, "/locks/billing", 10, "a", 0),
		ev(2, 2, wire.EvReleased, wire.CauseExpired, "/locks/billing", 10, "a", time.Minute),
		ev(2, 3, wire.EvAcquired, wire.CauseDirect, "/locks/billing/job", 11, "b", 2*time.Minute),
		ev(2, 4, wire.EvAcquired, wire.CauseDirect, "/locks/billingx", 12, "c", 3*time.Minute),
	})
	s.Record(3, []wire.Event{ev(3, 1, wire.EvAcquired, wire.CauseDirect, "/other/x", 1, "d", 0)})
	s.Sync()
	cases := []struct {
		name   string
		q      Query
		owners string
	}{
		{"prefix covers the subtree, not siblings", Query{Prefix: "/locks/billing"}, "[a a b]"},
		{"trailing slash", Query{Prefix: "/locks/billing/"}, "[a a b]"},
		{"by token", Query{Prefix: "/locks", Token: 10}, "[a a]"},
		{"since", Query{Prefix: "/locks", Since: t0.Add(90 * time.Second)}, "[b c]"},
		{"until", Query{Prefix: "/", Until: t0.Add(30 * time.Second)}, "[a d]"},
		{"limit keeps the most recent", Query{Prefix: "/locks", Limit: 1}, "[c]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			recs, err := s.Find(tc.q)
			if err != nil {
				t.Fatal(err)
			}
			var owners []string
			for _, r := range recs {
				owners = append(owners, r.Owner)
			}
			if fmt.Sprint(owners) != tc.owners {
				t.Fatalf("got %v, want %s", owners, tc.owners)
			}
		})
	}
	recs, _ := s.Find(Query{Prefix: "/locks/billing", Token: 10})
	if recs[1].Kind != "released" || recs[1].Cause != "expired" || recs[1].Mode != "exclusive" {
		t.Fatalf("record: %+v", recs[1])
	}
}

func TestReplayedEntriesAreRecordedOnce(t *testing.T) {
	dir := t.TempDir()
	s := open(t, Options{Dir: dir})
	batch := []wire.Event{ev(2, 1, wire.EvAcquired, wire.CauseDirect, "/a/b", 1, "a", 0)}
	s.Record(2, batch)
	s.Record(2, batch) // a replica replaying its log after a restart
	s.Close()
	s = open(t, Options{Dir: dir})
	if s.Newest(2) != 1 {
		t.Fatalf("newest after reopen: %d", s.Newest(2))
	}
	recs, _ := s.Find(Query{Prefix: "/a"})
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
}

func TestRetentionByAgeCompactsHistory(t *testing.T) {
	s := open(t, Options{MaxAge: time.Hour})
	for i := uint64(1); i <= 10; i++ {
		s.Record(2, []wire.Event{ev(2, i, wire.EvKVPut, wire.CauseUser, "/k/v", 0, "", time.Duration(i)*time.Minute)})
		// Retention drops whole values, and the entries a writer takes at
		// once share one: one value per entry here (a minute apart).
		s.Sync()
	}
	s.Sync()
	evs, err := s.History(2, 1, 10, 0)
	if err != nil || len(evs) != 10 {
		t.Fatalf("history: %d %v", len(evs), err)
	}
	// An hour after minute 4: events at minutes 1..3 are older than an hour.
	if n := s.Sweep(t0.Add(time.Hour + 4*time.Minute - time.Millisecond)); n != 3 {
		t.Fatalf("swept %d, want 3", n)
	}
	_, err = s.History(2, 2, 10, 0)
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.Compacted {
		t.Fatalf("history from a swept revision: %v", err)
	}
	evs, err = s.History(2, 4, 10, 0)
	if err != nil || len(evs) != 7 || evs[0].Rev != 4 {
		t.Fatalf("history after the sweep: %d %v", len(evs), err)
	}
	if recs, _ := s.Find(Query{Prefix: "/k"}); len(recs) != 7 {
		t.Fatalf("audit records after the sweep: %d", len(recs))
	}
	if _, err := s.History(2, 4, 10, 3); !errors.As(err, &we) || we.Code != wire.TooMany {
		t.Fatalf("history over the replay limit: %v", err)
	}
}

func TestRetentionBySize(t *testing.T) {
	s := open(t, Options{MaxBytes: 64 << 10})
	big := make([]byte, 1024)
	for i := uint64(1); i <= 400; i++ {
		e := ev(2, i, wire.EvKVPut, wire.CauseUser, "/k/v", 0, "", time.Duration(i)*time.Second)
		e.Value = big
		s.Record(2, []wire.Event{e})
	}
	s.Sync()
	s.db.Flush()
	before := s.size()
	if before <= 64<<10 {
		t.Skipf("store is only %d bytes; nothing to trim", before)
	}
	if n := s.Sweep(t0.Add(time.Hour)); n == 0 {
		t.Fatal("nothing dropped over the size limit")
	}
	recs, _ := s.Find(Query{Prefix: "/k", Limit: 1000})
	if len(recs) == 0 || len(recs) >= 400 || recs[0].Rev == 1 {
		t.Fatalf("after trimming: %d records from revision %d", len(recs), recs[0].Rev)
	}
	if recs[len(recs)-1].Rev != 400 {
		t.Fatal("trimming dropped the newest records")
	}
}

func TestRecordNeverBlocks(t *testing.T) {
	s := open(t, Options{Queue: 1})
	s.Close() // no writer: the queue fills at once
	s.Record(2, []wire.Event{ev(2, 1, wire.EvKVPut, wire.CauseUser, "/k/v", 0, "", 0)})
	s.Record(2, []wire.Event{ev(2, 2, wire.EvKVPut, wire.CauseUser, "/k/v", 0, "", 0)})
	if s.Dropped() != 1 {
		t.Fatalf("dropped %d, want 1", s.Dropped())
	}
}

func TestBatchEncodingRoundTrips(t *testing.T) {
	in := []wire.Event{
		{Rev: 1 << 60, Kind: wire.EvAcquired, Cause: wire.CauseHandOff, Path: "/x/y", Mode: wire.Shared, Token: 99, Lease: 1<<63 | 5,
			Owner: "carol", Client: 11, Seq: 12, Shard: 9, Time: 1795290794000},
		{Rev: 1<<60 + 1, Kind: wire.EvKVPut, Cause: wire.CauseUser, Path: "/x/yz", Value: []byte("v"), Version: 3, Shard: 9, Time: 1795290794000, TTL: 7},
		{Rev: 1<<60 + 2, Kind: wire.EvKVPut, Path: "/a", Value: []byte{}, Shard: 9, Time: 1795290794005},
		{Rev: 1<<60 + 3, Kind: wire.EvLease, Shard: 9, Time: 1795290794005, TTL: 10000},
	}
	b := appendBatch(nil, in)
	got, err := decodeBatch(nil, 9, in[0].Rev, b)
	if err != nil || fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", in) {
		t.Fatalf("round trip:\n%+v\n%+v (%v)", in, got, err)
	}
	h, _, err := readHeader(b, in[0].Rev)
	if err != nil || h.count != 4 || h.lastRev != in[3].Rev || h.firstTime != in[0].Time || h.lastTime != in[3].Time {
		t.Fatalf("header: %+v %v", h, err)
	}
	for i := 0; i < len(b); i++ {
		if _, err := decodeBatch(nil, 9, in[0].Rev, b[:i]); err == nil {
			t.Fatalf("truncated to %d bytes decoded", i)
		}
	}
}

func TestHistoryAcrossBatches(t *testing.T) {
	s := open(t, Options{})
	rev := uint64(0)
	for _, n := range []int{3, 1, 4} {
		var batch []wire.Event
		for i := 0; i < n; i++ {
			rev++
			batch = append(batch, ev(2, rev, wire.EvKVPut, wire.CauseUser, fmt.Sprintf("/k/%d", rev), 0, "", 0))
		}
		s.Record(2, batch)
	}
	s.Sync()
	cases := []struct{ from, to, first, n uint64 }{
		{1, 8, 1, 8}, {2, 8, 2, 7}, {4, 4, 4, 1}, {5, 6, 5, 2}, {3, 5, 3, 3}, {7, 100, 7, 2}, {9, 100, 0, 0},
	}
	for _, c := range cases {
		evs, err := s.History(2, c.from, c.to, 0)
		if err != nil || uint64(len(evs)) != c.n || c.n > 0 && (evs[0].Rev != c.first || evs[0].Path != fmt.Sprintf("/k/%d", c.first)) {
			t.Fatalf("History(%d, %d): %d events %v", c.from, c.to, len(evs), err)
		}
		for i := range evs {
			if evs[i].Rev != c.first+uint64(i) || evs[i].Shard != 2 {
				t.Fatalf("History(%d, %d): event %d is %+v", c.from, c.to, i, evs[i])
			}
		}
	}
	if s.Newest(2) != 8 {
		t.Fatalf("newest %d", s.Newest(2))
	}
}

// A directory holding a store of another format is refused with
// ErrFormat, not read as this one.
func TestOtherFormatIsRefused(t *testing.T) {
	dir := t.TempDir()
	db, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set([]byte{'v'}, []byte{storeFormat + 1}, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if s, err := Open(Options{Dir: dir}); !errors.Is(err, ErrFormat) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("Open gave %v, want ErrFormat", err)
	}
}

// crash simulates a power loss now: what the store wrote without syncing
// is gone, and nothing it does from now on (Close) reaches the disk. It
// returns the options that open what is left.
func crash(s *Store, o Options, fs *crashfs.FS) Options {
	st := fs.Capture()
	s.Close()
	o.FS = st.Image(crashfs.Synced, nil).VFS()
	return o
}

// The store has no log: records reach the disk at a flush, and Durable
// forces one. What was recorded before Durable survives a crash; what came
// after it is lost (a restarting replica records it again from its Raft
// log, see shard/durable.go). A clean Close keeps everything.
func TestDurableRecordsSurviveACrash(t *testing.T) {
	fs, o := strictStore(t)
	s := open(t, o)
	for rev := uint64(1); rev <= 20; rev++ {
		s.Record(2, []wire.Event{ev(2, rev, wire.EvKVPut, wire.CauseUser, "/k/v", 0, "", 0)})
		if rev == 10 {
			if err := s.Durable(); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.Sync()
	o = crash(s, o, fs)

	s = open(t, o)
	if s.Newest(2) != 10 {
		t.Fatalf("newest after a crash: %d, want 10 (durable up to 10, not after)", s.Newest(2))
	}
	if evs, err := s.History(2, 1, 20, 0); err != nil || len(evs) != 10 || evs[9].Rev != 10 {
		t.Fatalf("history after a crash: %d events %v", len(evs), err)
	}
	// The replay records 11..20 again; a clean close keeps them.
	for rev := uint64(11); rev <= 20; rev++ {
		s.Record(2, []wire.Event{ev(2, rev, wire.EvKVPut, wire.CauseUser, "/k/v", 0, "", 0)})
	}
	s.Close()
	s = open(t, o)
	if evs, err := s.History(2, 1, 20, 0); err != nil || len(evs) != 20 {
		t.Fatalf("history after a clean close: %d events %v", len(evs), err)
	}
}

// Entries the writer takes at once are stored as one value per run of
// consecutive revisions; they decode exactly as the events recorded.
func TestRunsOfSeveralEntriesRoundTrip(t *testing.T) {
	var r run
	in := []wire.Event{
		ev(9, 5, wire.EvAcquired, wire.CauseDirect, "/a/b", 1, "x", 0),
		ev(9, 6, wire.EvReleased, wire.CauseUser, "/a/b", 1, "x", time.Second),
		ev(9, 7, wire.EvAcquired, wire.CauseDirect, "/a/bc", 2, "y", time.Second),
		ev(9, 8, wire.EvKVPut, wire.CauseUser, "/k", 0, "", 3*time.Second),
	}
	r.add(in[:2])
	r.add(in[2:3])
	r.add(in[3:])
	if r.entries != 3 || r.n != 4 || r.first != 5 || r.last != 8 {
		t.Fatalf("run of 3 entries: %+v", r)
	}
	v := append(r.appendHeader(nil), r.body...)
	got, err := decodeBatch(nil, 9, 5, v)
	if err != nil || fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", in) {
		t.Fatalf("round trip:\n%+v\n%+v (%v)", in, got, err)
	}
	if want := appendBatch(nil, in); string(v) != string(want) {
		t.Fatal("a run of several entries is not encoded as one entry of the same events")
	}
}

// A replica replaying its log after a restart records entries the store
// may already have, grouped otherwise: the store keeps each event once.
func TestReplayedEventsAreKeptOnce(t *testing.T) {
	dir := t.TempDir()
	s := open(t, Options{Dir: dir})
	record := func(from, to uint64) {
		for rev := from; rev <= to; rev += 2 {
			s.Record(2, []wire.Event{
				ev(2, rev, wire.EvAcquired, wire.CauseDirect, "/k/a", rev, "o", 0),
				ev(2, rev+1, wire.EvReleased, wire.CauseUser, "/k/a", rev, "o", 0),
			})
			if rev%6 == 1 {
				s.Sync() // values of different sizes
			}
		}
		s.Sync()
	}
	check := func(name string, want uint64) {
		t.Helper()
		evs, err := s.History(2, 1, 1000, 0)
		if err != nil || uint64(len(evs)) != want {
			t.Fatalf("%s: history %d events, want %d (%v)", name, len(evs), want, err)
		}
		for i := range evs {
			if evs[i].Rev != uint64(i)+1 {
				t.Fatalf("%s: event %d has revision %d", name, i, evs[i].Rev)
			}
		}
		if recs, _ := s.Find(Query{Prefix: "/k"}); uint64(len(recs)) != want {
			t.Fatalf("%s: %d audit records, want %d", name, len(recs), want)
		}
	}
	record(1, 40)
	record(11, 60) // the same entries again, then new ones
	check("replayed in the same process", 60)
	s.Close()
	s = open(t, Options{Dir: dir})
	record(21, 80)
	check("replayed after reopening", 80)
}

// Records of several shards' entries, taken by the writer in batches,
// survive a crash once Durable returned.
func TestBatchedRecordsSurviveACrashAfterDurable(t *testing.T) {
	fs, o := strictStore(t)
	s := open(t, o)
	for rev := uint64(1); rev <= 300; rev++ {
		for shard := uint64(2); shard <= 4; shard++ {
			s.Record(shard, []wire.Event{ev(shard, rev, wire.EvKVPut, wire.CauseUser, "/k/v", 0, "", 0)})
		}
	}
	if err := s.Durable(); err != nil {
		t.Fatal(err)
	}
	for shard := uint64(2); shard <= 4; shard++ {
		s.Record(shard, []wire.Event{ev(shard, 301, wire.EvKVPut, wire.CauseUser, "/k/v", 0, "", 0)})
	}
	s.Sync()
	s = open(t, crash(s, o, fs))
	for shard := uint64(2); shard <= 4; shard++ {
		if evs, err := s.History(shard, 1, 400, 0); err != nil || len(evs) != 300 || s.Newest(shard) != 300 {
			t.Fatalf("shard %d after a crash: %d events, newest %d (%v), want 300", shard, len(evs), s.Newest(shard), err)
		}
	}
}

// A flush of pebble's own (a full memtable) that ended after the records
// were written has made them durable: Durable forces no second one. One
// that ended before the last records does not count.
func TestDurableSkipsTheFlushWhenAFlushCoveredTheRecords(t *testing.T) {
	fs, o := strictStore(t)
	s := open(t, o)
	for rev := uint64(1); rev <= 10; rev++ {
		s.Record(2, []wire.Event{ev(2, rev, wire.EvKVPut, wire.CauseUser, "/k/v", 0, "", 0)})
	}
	s.Sync()
	if err := s.db.Flush(); err != nil { // as when the memtable fills
		t.Fatal(err)
	}
	if err := s.Durable(); err != nil {
		t.Fatal(err)
	}
	if s.durableSkips.Load() != 1 || s.durableFlushes.Load() != 0 {
		t.Fatalf("after a covering flush: %d skipped, %d forced flushes; want 1, 0", s.durableSkips.Load(), s.durableFlushes.Load())
	}
	for rev := uint64(11); rev <= 15; rev++ {
		s.Record(2, []wire.Event{ev(2, rev, wire.EvKVPut, wire.CauseUser, "/k/v", 0, "", 0)})
	}
	if err := s.Durable(); err != nil {
		t.Fatal(err)
	}
	if s.durableFlushes.Load() != 1 {
		t.Fatalf("records written after the last flush: %d forced flushes, want 1", s.durableFlushes.Load())
	}
	s.Record(2, []wire.Event{ev(2, 16, wire.EvKVPut, wire.CauseUser, "/k/v", 0, "", 0)})
	s.Sync()
	s = open(t, crash(s, o, fs))
	if evs, err := s.History(2, 1, 20, 0); err != nil || len(evs) != 15 || s.Newest(2) != 15 {
		t.Fatalf("after a crash: %d events, newest %d (%v); want 15, 15", len(evs), s.Newest(2), err)
	}
}

// strictStore is a store's options on a file system that can lose power
// (see crash).
func strictStore(t *testing.T) (*crashfs.FS, Options) {
	t.Helper()
	fs := crashfs.New()
	return fs, Options{Dir: "audit", FS: fs.VFS()}
}

// The writer pauses between writes (Linger) while records keep coming;
// History still returns everything recorded before it is called.
func TestHistoryReadsRecordsTheWriterHasNotTakenYet(t *testing.T) {
	s := open(t, Options{Linger: time.Hour})
	for rev := uint64(1); rev <= 5; rev++ {
		s.Record(2, []wire.Event{ev(2, rev, wire.EvKVPut, wire.CauseUser, "/k/v", 0, "", 0)})
	}
	if evs, err := s.History(2, 1, 10, 0); err != nil || len(evs) != 5 {
		t.Fatalf("history right after recording: %d events, want 5 (%v)", len(evs), err)
	}
	s.Record(2, []wire.Event{ev(2, 6, wire.EvKVPut, wire.CauseUser, "/k/v", 0, "", 0)})
	if recs, err := s.Find(Query{Prefix: "/k"}); err != nil || len(recs) != 6 {
		t.Fatalf("audit records right after recording: %d, want 6 (%v)", len(recs), err)
	}
	if s.Newest(2) != 6 {
		t.Fatalf("newest %d, want 6", s.Newest(2))
	}
}

// appendBatch encodes events (of one shard, in revision order) after b as
// one value, the way the writer stores a run.
func appendBatch(b []byte, events []wire.Event) []byte {
	var r run
	r.add(events)
	return append(r.appendHeader(b), r.body...)
}
