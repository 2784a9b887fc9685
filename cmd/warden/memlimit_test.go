package main

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestMemoryLimitFlag(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	tests := []struct {
		name  string
		in    string
		want  int64 // -1: half the machine's memory
		isErr bool
	}{
		{name: "binary suffix", in: "512MiB", want: 512 << 20},
		{name: "short suffix", in: "2g", want: 2 << 30},
		{name: "bytes", in: "800000000", want: 800000000},
		{name: "off", in: "off", want: math.MaxInt64},
		{name: "auto", in: "auto", want: -1},
		{name: "too small", in: "1MiB", isErr: true},
		{name: "not a size", in: "lots", isErr: true},
		{name: "negative", in: "-5G", isErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := memoryLimit(tc.in)
			if tc.isErr {
				if err == nil {
					t.Fatalf("memoryLimit(%q) = %d, want an error", tc.in, got)
				}
				return
			}
			want := tc.want
			if want == -1 {
				want = int64(float64(machineMemory()) * memoryLimitShare)
			}
			if err != nil || !ok || got != want || got <= 0 {
				t.Fatalf("memoryLimit(%q) = %d, %v, %v; want %d", tc.in, got, ok, err, want)
			}
		})
	}
	t.Setenv("GOMEMLIMIT", "1GiB")
	if _, ok, err := memoryLimit("auto"); ok || err != nil {
		t.Fatalf("auto with GOMEMLIMIT set: ok=%v err=%v, want the runtime's setting left alone", ok, err)
	}
}

// The heap floor is in place after the limit is applied, and never more
// than an eighth of a small limit (the collector must still run well
// before a small limit is reached).
func TestHeapFloor(t *testing.T) {
	for _, tc := range []struct {
		limit, want int64
	}{
		{math.MaxInt64, 64 << 20},
		{12 << 30, 64 << 20},
		{256 << 20, 32 << 20},
		{0, 0},
	} {
		if got := floorBytes(tc.limit); got != tc.want {
			t.Errorf("floorBytes(%d) = %d, want %d", tc.limit, got, tc.want)
		}
	}
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	if _, err := applyMemoryLimit("256MiB"); err != nil {
		t.Fatal(err)
	}
	if len(heapFloor) != 32<<20 {
		t.Fatalf("heap floor %d bytes after a 256 MiB limit, want 32 MiB", len(heapFloor))
	}
	heapFloor = nil
}
