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
	if f.Syncs < probeWriters {
		t.Fatalf("%d syncs in 300 ms from %d writers", f.Syncs, probeWriters)
	}
	if !(0 < f.P50Us && f.P50Us <= f.P99Us && f.P99Us <= f.P999Us && f.P999Us <= f.MaxUs) {
		t.Fatalf("percentiles out of order: %+v", f)
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
