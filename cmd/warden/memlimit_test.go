package main

import (
	"math"
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
