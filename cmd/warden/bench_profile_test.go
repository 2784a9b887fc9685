package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestBenchCPUProfile: --cpuprofile leaves a gzip-compressed pprof profile
// once the run is over, and an unwritable path is an error, not a panic.
func TestBenchCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lg.prof")
	stop, err := startCPUProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1e6; i++ { // something to sample
		_ = bytes.Repeat([]byte{byte(i)}, 4)
	}
	stop()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("profile of %d bytes is not gzip data", len(b))
	}
	if _, err := startCPUProfile(filepath.Join(t.TempDir(), "missing", "lg.prof")); err == nil {
		t.Fatal("a profile in a missing directory was accepted")
	}
}
