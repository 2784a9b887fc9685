package metrics_test

import (
	"net"
	"testing"

	"github.com/wardenlock/warden/metrics"
	"github.com/wardenlock/warden/router"
	"github.com/wardenlock/warden/wire"
)

// BenchmarkRequestHook is the cost the router pays per answered request:
// an atomic add to the request tally and a histogram record with a
// precomputed attribute set.
func BenchmarkRequestHook(b *testing.B) {
	srv := router.New(router.Config{Seeds: []string{unreachable(b)}})
	defer srv.Close()
	m, err := metrics.New(metrics.Config{Router: srv})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	b.ReportAllocs()
	for b.Loop() {
		m.ObserveRequest(wire.OpAcquire, wire.OK)
	}
}

func unreachable(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
