package hierarchy

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/wardenlock/warden/wire"
)

func TestValidate(t *testing.T) {
	lim := Limits{MaxPathBytes: 64, MaxDepth: 4}
	cases := []struct {
		name string
		path string
		ok   bool
	}{
		{"root", "/", true},
		{"simple", "/locks/billing/job-7", true},
		{"empty", "", false},
		{"relative", "locks/a", false},
		{"trailing slash", "/a/", false},
		{"double slash", "/a//b", false},
		{"dot", "/a/./b", false},
		{"dotdot", "/a/../b", false},
		{"control", "/a/\x01b", false},
		{"del", "/a/\x7f", false},
		{"too deep", "/a/b/c/d/e", false},
		{"depth limit", "/a/b/c/d", true},
		{"too long", "/" + strings.Repeat("x", 64), false},
		{"dots inside names", "/a.b/..c", true},
		{"utf-8", "/locks/\u00e9t\u00e9/\u65e5\u672c", true},
		{"not utf-8", "/locks/\xff\xfe", false},
		{"truncated utf-8", "/a/\xc3", false},
		{"not utf-8 past eight bytes", "/billing/jobs-and-more/\xc0\xaf", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.path, lim)
			if tc.ok && err != nil {
				t.Fatalf("Validate(%q) = %v, want ok", tc.path, err)
			}
			if !tc.ok && !errors.Is(err, wire.ErrInvalidArgument) {
				t.Fatalf("Validate(%q) = %v, want InvalidArgument", tc.path, err)
			}
		})
	}
}

func TestKeyOrderKeepsSubtreesContiguous(t *testing.T) {
	p := "/locks"
	start, end := Key(p), SubtreeEnd(p)
	inside := []string{"/locks", "/locks/a", "/locks/zz/y"}
	outside := []string{"/locks-x", "/lock", "/locksa", "/m", "/a"}
	for _, q := range inside {
		if k := Key(q); k < start || k >= end {
			t.Errorf("%q should be inside /locks's interval", q)
		}
	}
	for _, q := range outside {
		if k := Key(q); k >= start && k < end {
			t.Errorf("%q should be outside /locks's interval", q)
		}
	}
	if PathOf(Key("/a/b")) != "/a/b" {
		t.Fatal("PathOf is not the inverse of Key")
	}
}

func TestNamespaceAndSpan(t *testing.T) {
	cases := []struct {
		path, ns string
		point    bool
	}{
		{"/locks/billing/job-7", "/locks/billing", true},
		{"/locks/billing", "/locks/billing", true},
		{"/locks", "/locks", false},
		{"/", "/", false},
	}
	for _, tc := range cases {
		if got := Namespace(tc.path, 2); got != tc.ns {
			t.Errorf("Namespace(%q) = %q, want %q", tc.path, got, tc.ns)
		}
		s, e := Span(tc.path, 2)
		if !tc.point {
			if s != "" || e != "" {
				t.Errorf("Span(%q) = %q,%q, want the whole key space", tc.path, s, e)
			}
			continue
		}
		if s != RouteKey(tc.ns) || e != s+"\x00" {
			t.Errorf("Span(%q) is not the point of its namespace", tc.path)
		}
	}
	a, _ := Span("/locks/billing/x", 2)
	b, _ := Span("/locks/billing/y/z", 2)
	if a != b {
		t.Error("paths of one namespace must route to the same key")
	}
}

func TestInRange(t *testing.T) {
	k := RouteKey("/a/b")
	cases := []struct {
		name               string
		start, end, rs, re string
		want               bool
	}{
		{"point in unbounded", k, k + "\x00", "", "", true},
		{"point below start", k, k + "\x00", k + "\x01", "", false},
		{"point at end", k, k + "\x00", "", k, false},
		{"everything in bounded", "", "", "", k, false},
		{"everything in everything", "", "", "", "", true},
	}
	for _, tc := range cases {
		if got := InRange(tc.start, tc.end, tc.rs, tc.re); got != tc.want {
			t.Errorf("%s: got %v", tc.name, got)
		}
	}
}

// TestValidateFastRoadAgrees: the fast road (plainPath) accepts only what the
// careful road (whyInvalid) accepts, on every string up to 6 bytes over an
// alphabet of the bytes that matter, at limits that bind.
func TestValidateFastRoadAgrees(t *testing.T) {
	alphabet := []byte{'/', '.', 'a', 0x01, 0x7f, '-', 0xc3}
	lims := []Limits{{MaxPathBytes: 6, MaxDepth: 2}, DefaultLimits}
	fast := 0
	var walk func(b []byte)
	walk = func(b []byte) {
		p := string(b)
		for _, lim := range lims {
			lim = lim.withDefaults()
			slow := whyInvalid(p, lim)
			if plainPath(p, lim) {
				fast++
				if slow != nil {
					t.Fatalf("plainPath accepts %q (limits %+v), whyInvalid says %v", p, lim, slow)
				}
			}
			if got := Validate(p, lim); (got == nil) != (slow == nil) {
				t.Fatalf("Validate(%q) = %v, whyInvalid = %v", p, got, slow)
			}
		}
		if len(b) == 6 {
			return
		}
		for _, c := range alphabet {
			walk(append(b, c))
		}
	}
	walk(nil)
	if fast == 0 {
		t.Fatal("the fast road accepted nothing")
	}
}

// TestValidateFastRoadAgreesOnLongPaths does the same for paths long enough
// for plainPath's eight-byte steps: segments drawn from a list of good and
// bad ones, then one byte sometimes changed.
func TestValidateFastRoadAgreesOnLongPaths(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	segs := []string{"a", "ab", "abc", ".", "..", "...", "", "bench", "u12-3", "lock", "x\x01y", "\x7f",
		"\xc3\xa9t\xc3\xa9", "a.b", "very-long-segment-name", "\x1f", " "}
	lims := []Limits{{MaxPathBytes: 40, MaxDepth: 5}, DefaultLimits}
	fast := 0
	for i := 0; i < 200000; i++ {
		var b strings.Builder
		for d := rng.IntN(12); d >= 0; d-- {
			b.WriteByte('/')
			b.WriteString(segs[rng.IntN(len(segs))])
		}
		p := []byte(b.String())
		if rng.IntN(4) == 0 {
			p[rng.IntN(len(p))] = []byte{'/', '.', 0x00, 0x7f, 0x80, 'z', 0x20, 0x2e}[rng.IntN(8)]
		}
		for _, lim := range lims {
			lim = lim.withDefaults()
			slow := whyInvalid(string(p), lim)
			if plainPath(string(p), lim) {
				fast++
				if slow != nil {
					t.Fatalf("plainPath accepts %q (limits %+v), whyInvalid says %v", p, lim, slow)
				}
			} else if slow == nil && len(p) > 1 {
				t.Fatalf("plainPath refuses valid %q (limits %+v)", p, lim)
			}
		}
	}
	if fast < 10000 {
		t.Fatalf("the fast road accepted only %d paths", fast)
	}
}

// TestMarkedBytes checks marked against its definition for every byte
// value at every position of a word, with every byte value around it.
func TestMarkedBytes(t *testing.T) {
	want := func(c byte) bool { return c < 0x20 || c == 0x7f || c == '/' }
	for c := 0; c < 256; c++ {
		for f := 0; f < 256; f++ {
			for k := 0; k < 8; k++ {
				w := uint64(f) * ones
				w = w&^(0xff<<(8*k)) | uint64(c)<<(8*k)
				m := marked(w)
				if m&^high != 0 {
					t.Fatalf("marked(%#x) = %#x sets bits besides bit 7", w, m)
				}
				for j := 0; j < 8; j++ {
					b := byte(w >> (8 * j))
					if got := m>>(8*j+7)&1 == 1; got != want(b) {
						t.Fatalf("marked(%#x): byte %d (%#x) marked=%v", w, j, b, got)
					}
				}
			}
		}
	}
}
