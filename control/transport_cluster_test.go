package control

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/wardenlock/warden/statemachine"
	"github.com/wardenlock/warden/wire"
)

// A replica that was down while its shard snapshotted and compacted its
// log can only catch up by receiving a snapshot: this runs that through the
// transport (chunks, bye, ack) on three real hosts.
func TestLaggingReplicaCatchesUpBySnapshot(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three hosts")
	}
	ports := freeAddrs(t, 3)
	members := map[uint64]string{1: ports[0], 2: ports[1], 3: ports[2]}
	dir := t.TempDir()
	cfg := func(i int) HostConfig {
		return HostConfig{NodeID: uint64(i + 1), RaftAddr: ports[i], DataDir: fmt.Sprintf("%s/n%d", dir, i+1),
			Members: members, DataShards: 1, SnapshotEntries: 20, NoLeaderBalance: true,
			Log: slog.New(slog.DiscardHandler)}
	}
	hosts := make([]*Host, 3)
	start := func(i int) { hosts[i] = startHost(t, cfg(i)) }
	for i := range hosts {
		start(i)
	}
	defer func() {
		for _, h := range hosts {
			if h != nil {
				h.Close()
			}
		}
	}()
	const id = 2
	deadline := time.Now().Add(90 * time.Second) // bounds a hang; not a timing goal
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("gave up waiting for %s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	leaderIdx := func() int {
		for i, h := range hosts {
			if h != nil {
				if s, _ := h.Shard(id); s.IsLeader() {
					return i
				}
			}
		}
		return -1
	}
	waitFor("a leader that owns its ranges", func() bool {
		i := leaderIdx()
		if i < 0 {
			return false
		}
		s, _ := hosts[i].Shard(id)
		return s.AppliedIndex() > 0 && hosts[i].Table() != nil && len(hosts[i].Table().RangesOf(id)) > 0
	})
	lagging := (leaderIdx() + 1) % 3
	t.Logf("stopping host %d (%s)", lagging+1, ports[lagging])
	hosts[lagging].Close()
	hosts[lagging] = nil

	put := func(k int) wire.Code {
		for {
			li := leaderIdx()
			if li < 0 {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			s, _ := hosts[li].Shard(id)
			done := make(chan *wire.Response, 1)
			s.Submit(&wire.Request{Op: wire.OpKVPut, Path: fmt.Sprintf("/snap/k%03d", k), Value: []byte("v")},
				func(r *wire.Response) { done <- r })
			r := <-done
			if r.Code.Retryable() && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			return r.Code
		}
	}
	for k := 0; k < 150; k++ {
		if code := put(k); code != wire.OK {
			t.Fatalf("put %d: %v", k, code)
		}
	}
	li := leaderIdx()
	ls, _ := hosts[li].Shard(id)
	target := ls.AppliedIndex()

	t.Logf("restarting host %d at index %d", lagging+1, target)
	start(lagging)
	ss, _ := hosts[lagging].Shard(id)
	waitFor("the restarted replica to catch up", func() bool { return ss.AppliedIndex() >= target })
	v, err := hosts[lagging].NodeHost().StaleRead(id, statemachine.StatsQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := v.(statemachine.Stats); st.KVs != 150 {
		t.Fatalf("the caught-up replica has %d keys, want 150", st.KVs)
	}
}

// A host bounds dragonboat's Raft message queues by bytes as well as by
// count: a peer that cannot keep up (a replica catching up on a node short
// of CPU) otherwise makes its senders' queues, and its own, grow by
// gigabytes.
func TestHostBoundsRaftQueues(t *testing.T) {
	ports := freeAddrs(t, 1)
	h := startHost(t, HostConfig{NodeID: 1, RaftAddr: ports[0], DataDir: t.TempDir(), Members: map[uint64]string{1: ports[0]},
		DataShards: 1, NoLeaderBalance: true, Log: slog.New(slog.DiscardHandler)})
	defer h.Close()
	c := h.NodeHost().NodeHostConfig()
	if c.MaxSendQueueSize != raftSendQueueBytes || c.MaxReceiveQueueSize != raftReceiveQueueBytes {
		t.Fatalf("send queue %d bytes, receive queue %d bytes: want %d and %d",
			c.MaxSendQueueSize, c.MaxReceiveQueueSize, raftSendQueueBytes, raftReceiveQueueBytes)
	}
}
