package wire

import "testing"

func TestSpanIsAPointAfterTheRouteKey(t *testing.T) {
	start, end := Span("/locks/billing/job-7", 2)
	if start != RouteKey("/locks/billing") || end != start+"\x00" {
		t.Fatalf("span %x %x, route key %x", start, end, RouteKey("/locks/billing"))
	}
	if s, e := Span("/locks", 2); s != "" || e != "" {
		t.Fatalf("a shallow path spans everything, got %x %x", s, e)
	}
}

// The router, the client and every replica compute a span per operation.
func BenchmarkSpan(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		Span("/bench/w17-3/lock", 2)
	}
}

// SpanInto gives exactly Span's keys, and its keys stay put for as long as
// the buffer is not reused.
func TestSpanIntoIsSpan(t *testing.T) {
	for _, p := range []string{"/", "/locks", "/locks/a", "/locks/billing/job-7", "/a/b/c/d/e", "/x/" + string(make([]byte, 300))} {
		for depth := 0; depth < 4; depth++ {
			var buf SpanBuf
			s, e := SpanInto(p, depth, &buf)
			ws, we := Span(p, depth)
			if s != ws || e != we {
				t.Fatalf("SpanInto(%q, %d) = %x %x, Span = %x %x", p, depth, s, e, ws, we)
			}
		}
	}
}

// A route lookup allocates nothing: the router does one per request, the
// client one per call.
func TestRouteTableLocateDoesNotAllocate(t *testing.T) {
	tab := &RouteTable{Depth: 2, Ranges: []Range{{End: RouteKey("/m/n"), Shard: 2}, {Start: RouteKey("/m/n"), Shard: 3}}}
	var shard uint64
	if n := testing.AllocsPerRun(100, func() { shard, _ = tab.Locate("/bench/w17-3/lock") }); n != 0 {
		t.Fatalf("Locate allocates %v times per call", n)
	}
	if shard == 0 {
		t.Fatal("no shard located")
	}
}

func BenchmarkSpanInto(b *testing.B) {
	b.ReportAllocs()
	var buf SpanBuf
	for i := 0; i < b.N; i++ {
		SpanInto("/bench/w17-3/lock", 2, &buf)
	}
}
