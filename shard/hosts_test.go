package shard

import (
	"net"
	"testing"
	"time"
)

// freeAddrs returns n loopback addresses whose ports were free a moment ago.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	addrs := make([]string, n)
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = ln.Addr().String()
		ln.Close()
	}
	return addrs
}

// startHost starts a host, retrying for a while: a port just closed by
// freeAddrs, or by a host that was stopped, may linger.
func startHost(t *testing.T, cfg HostConfig) *Host {
	t.Helper()
	var err error
	for attempt := 0; attempt < 50; attempt++ {
		var h *Host
		if h, err = NewHost(cfg); err == nil {
			return h
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("start host %d: %v", cfg.NodeID, err)
	return nil
}
