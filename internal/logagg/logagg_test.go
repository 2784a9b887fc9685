package logagg

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) { b.mu.Lock(); defer b.mu.Unlock(); return b.b.Write(p) }
func (b *buffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Split(strings.TrimSpace(b.b.String()), "\n")
}

// TestRepeatsAreSummedUp: 10 000 occurrences of one key make two lines:
// the first in full, then one summary with the count; another key gets its
// own first line; a key quiet for a whole interval is written in full
// again.
func TestRepeatsAreSummedUp(t *testing.T) {
	var buf buffer
	l := New(slog.New(slog.NewTextHandler(&buf, nil)), slog.LevelInfo, "lease expired", 20*time.Millisecond)
	for i := 0; i < 10_000; i++ {
		l.Add("shard 3", "shard", 3, "lease", i)
	}
	l.Add("shard 4", "shard", 4, "lease", 1)
	waitFor(t, func() bool { return len(buf.lines()) == 3 })
	lines := buf.lines()
	if !strings.Contains(lines[0], `msg="lease expired" shard=3 lease=0`) || !strings.Contains(lines[1], "shard=4") {
		t.Fatalf("first lines: %q", lines[:2])
	}
	if !strings.Contains(lines[2], `msg="lease expired (repeated)" repeated=9999`) || !strings.Contains(lines[2], "lease=9999") {
		t.Fatalf("summary: %q", lines[2])
	}
	// Quiet for more than an interval: the next one is written at once.
	waitFor(t, func() bool { l.mu.Lock(); defer l.mu.Unlock(); return l.timer == nil })
	l.Add("shard 3", "shard", 3, "lease", 77)
	if lines := buf.lines(); len(lines) != 4 || !strings.Contains(lines[3], "lease=77") {
		t.Fatalf("after a quiet interval: %q", lines)
	}
}

// TestDisabledLevelCostsNothing: below the logger's level nothing is kept
// or scheduled.
func TestDisabledLevelCostsNothing(t *testing.T) {
	var buf buffer
	l := New(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})), slog.LevelInfo, "x", time.Millisecond)
	l.Add("k", "a", 1)
	if len(l.keys) != 0 || l.timer != nil || buf.b.Len() != 0 {
		t.Fatal("a disabled line was kept")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
