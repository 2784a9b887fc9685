package router

import (
	"testing"

	"github.com/wardenlock/warden/wire"
)

// BenchmarkTrackOff is what observation costs a request when no hooks are
// installed and tracing is off: it must stay at a few nanoseconds, no
// allocations.
func BenchmarkTrackOff(b *testing.B) {
	s := &Server{}
	req := &wire.Request{Op: wire.OpAcquire, Path: "/a/b"}
	resp := &wire.Response{}
	b.ReportAllocs()
	for b.Loop() {
		t := s.track(req, false)
		t.done(req, resp)
	}
}
