package shard

import (
	"testing"

	sm "github.com/lni/dragonboat/v4/statemachine"
)

// TestLogBoundAsksOncePastTheLimit: entries under the limit ask for
// nothing; the entry that takes the log past it asks once, later ones do
// not while that request is out, and a snapshot starts the count over.
func TestLogBoundAsksOncePastTheLimit(t *testing.T) {
	asks := make(chan uint64, 4)
	b := &logBound{limit: 1000, request: func(keep uint64) { asks <- keep }}
	entry := func(n int) []sm.Entry { return []sm.Entry{{Cmd: make([]byte, n)}} }
	for i := 0; i < 9; i++ {
		b.applied(entry(100))
	}
	select {
	case k := <-asks:
		t.Fatalf("asked (keep %d) at 900 bytes of a 1000-byte limit", k)
	default:
	}
	b.applied(entry(100))
	// 10 entries of 100 bytes: a quarter of the limit is 2.5 entries.
	if k := <-asks; k != 2 {
		t.Fatalf("keep %d entries, want 2 (a quarter of the limit)", k)
	}
	b.applied(entry(5000))
	select {
	case k := <-asks:
		t.Fatalf("asked again (keep %d) while a request was out", k)
	default:
	}
	b.prepared()
	b.asked.Store(false)
	b.applied(entry(999))
	select {
	case k := <-asks:
		t.Fatalf("asked (keep %d) at 999 bytes after a snapshot", k)
	default:
	}
	b.applied(entry(1))
	if k := <-asks; k != 1 {
		t.Fatalf("keep %d, want 1", k)
	}
}

// TestLogBoundOff: a bound without a limit (negative: entries only) and a
// state machine without a bound never ask.
func TestLogBoundOff(t *testing.T) {
	b := &logBound{limit: -1, request: func(uint64) { t.Fatal("asked with the bound off") }}
	b.applied([]sm.Entry{{Cmd: make([]byte, 1<<20)}})
	var none *logBound
	none.applied([]sm.Entry{{Cmd: make([]byte, 1<<20)}})
	none.prepared()
}

func TestKeepEntries(t *testing.T) {
	for _, c := range []struct {
		entries, bytes, limit int64
		want                  uint64
	}{
		{0, 0, 100, 1},
		{100, 1000, 1000, 25},      // a quarter of the entries
		{100, 4000, 1000, 6},       // entries 4× larger than the limit's share: fewer kept
		{100, 100000, 1000, 1},     // at least one
		{1000, 1000, 1 << 20, 250}, // never more than a quarter of the entries
	} {
		if got := keepEntries(c.entries, c.bytes, c.limit); got != c.want {
			t.Errorf("keepEntries(%d, %d, %d) = %d, want %d", c.entries, c.bytes, c.limit, got, c.want)
		}
	}
}
