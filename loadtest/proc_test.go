package loadtest

import (
	"os"
	"testing"
)

// This process's peak resident memory is at least its current one, and
// both are read from /proc in bytes.
func TestProcPeakRSSIsAtLeastRSS(t *testing.T) {
	now, err := ProcRSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	peak, err := ProcPeakRSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if now <= 0 || peak < now {
		t.Fatalf("RSS %d bytes, peak %d bytes", now, peak)
	}
	if _, err := ProcPeakRSS(-1); err == nil {
		t.Fatal("no error for a process that does not exist")
	}
}
