package main

import "testing"

func TestParseProcs(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		n        int
		auto     bool
		bad      bool
	}{
		{name: "default is auto", in: "", auto: true},
		{name: "auto", in: "Auto", auto: true},
		{name: "runtime's own", in: "runtime"},
		{name: "a count", in: "3", n: 3},
		{name: "zero", in: "0", bad: true},
		{name: "garbage", in: "many", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, auto, err := parseProcs(tc.in)
			if (err != nil) != tc.bad || n != tc.n || auto != tc.auto {
				t.Fatalf("parseProcs(%q) = %d, %v, %v; want %d, %v, error %v", tc.in, n, auto, err, tc.n, tc.auto, tc.bad)
			}
		})
	}
}
