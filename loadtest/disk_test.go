package loadtest

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestProbeDiskMeasuresSyncs(t *testing.T) {
	dir := t.TempDir()
	var m Machine
	m.ProbeDisk(dir, 300*time.Millisecond)
	if m.Disk == nil {
		t.Fatalf("probe failed: %s", m.DiskError)
	}
	f := *m.Disk
	if f.Syncs.Count < probeWriters || f.Writers != probeWriters {
		t.Fatalf("%d syncs in 300 ms from %d writers", f.Syncs.Count, f.Writers)
	}
	if s := f.Syncs; !(0 < s.P50Ms && s.P50Ms <= s.P99Ms && s.P99Ms <= s.P999Ms && s.P999Ms <= s.MaxMs) {
		t.Fatalf("percentiles out of order: %+v", s)
	}
	if f.SlowShare < 0 || f.SlowShare > 1 {
		t.Fatalf("slow share %v", f.SlowShare)
	}
	if line := m.DiskLine(); !strings.Contains(line, "fdatasync") || !strings.Contains(line, dir) {
		t.Fatalf("disk line %q", line)
	}
	left, err := os.ReadDir(dir)
	if err != nil || len(left) != 0 {
		t.Fatalf("probe left %v behind (%v)", left, err)
	}
}

func TestProbeDiskReportsFailure(t *testing.T) {
	var m Machine
	m.ProbeDisk("/nonexistent/warden-probe", 10*time.Millisecond)
	if m.Disk != nil || !strings.HasPrefix(m.DiskLine(), "Disk probe failed") {
		t.Fatalf("disk %+v, line %q", m.Disk, m.DiskLine())
	}
	if (Machine{}).DiskLine() != "" {
		t.Fatal("a machine without a probe has a disk line")
	}
}

func TestProbeDiskPaced(t *testing.T) {
	p := DiskProbe{Dir: t.TempDir(), Writers: 2, Rate: 50, Duration: 300 * time.Millisecond}
	f, stalls, err := p.Run()
	if err != nil {
		t.Fatal(err)
	}
	// Paced at 50/s, a writer starts at most 1 + 50 × 0.3 syncs.
	if most := int64(2 * (1 + 15)); f.Syncs.Count == 0 || f.Syncs.Count > most {
		t.Fatalf("%d syncs from 2 writers paced at 50/s for 300 ms (at most %d)", f.Syncs.Count, most)
	}
	if f.Paced != 50 || !strings.Contains(f.String(), "50/s each") {
		t.Fatalf("pace not reported: %s", f)
	}
	for i, s := range stalls {
		if s.Took <= SlowSync || (i > 0 && s.At < stalls[i-1].At) {
			t.Fatalf("stalls not over %v in start order: %v", SlowSync, stalls)
		}
	}
}
