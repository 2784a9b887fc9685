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
