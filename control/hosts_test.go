package control

import (
	"fmt"
	"log/slog"
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

// startThree starts a three-node cluster of hosts on free loopback ports,
// each with its data dir under one temp dir and the settings edit gives it
// (DataShards, NoLeaderBalance, ...); the hosts are closed when the test
// ends.
func startThree(t *testing.T, edit func(*HostConfig)) []*Host {
	t.Helper()
	ports := freeAddrs(t, 3)
	members := map[uint64]string{1: ports[0], 2: ports[1], 3: ports[2]}
	dir := t.TempDir()
	hosts := make([]*Host, 3)
	t.Cleanup(func() {
		for _, h := range hosts {
			if h != nil {
				h.Close()
			}
		}
	})
	for i := range hosts {
		cfg := HostConfig{NodeID: uint64(i + 1), RaftAddr: ports[i], DataDir: fmt.Sprintf("%s/n%d", dir, i+1),
			Members: members, Log: slog.New(slog.DiscardHandler)}
		edit(&cfg)
		hosts[i] = startHost(t, cfg)
	}
	return hosts
}
