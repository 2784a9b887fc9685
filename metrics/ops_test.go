package metrics_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wardenlock/warden/node"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/wire"
)

// TestScrapeProposalsRangeMovesAudit: after known traffic nothing is left
// pending and nothing failed; every node recorded the applied events in its
// audit store; range moves count what was recorded; and proposals made
// without a quorum count as failed.
func TestScrapeProposalsRangeMovesAudit(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Shards: 2, Edit: func(cfg *node.Config) {
		cfg.AdminAddr = "127.0.0.1:0"
		cfg.Shard.ProposalTimeout = time.Second
	}})
	ctx, cl := dial(t, c, 60*time.Second)
	const acquires = 4
	for i := 0; i < acquires; i++ {
		if _, err := cl.Acquire(ctx, fmt.Sprintf("/ops/ns%d/job", i), 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// One watch, known to be subscribed once it has seen an event.
	wctx, stopWatch := context.WithCancel(ctx)
	events := cl.Watch(wctx, "/ops/w/key")
	if _, err := cl.Put(ctx, "/ops/w/key", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if wr := <-events; wr.Err != nil || len(wr.Events) == 0 {
		t.Fatalf("watch: %+v", wr)
	}
	c.Nodes[0].Host.RangeMoved("", "\x40", 2, 3, 2)
	c.Nodes[0].Host.RangeMoved("\x40", "\x80", 3, 2, 3)
	// Followers apply after the leader answered: wait until every node has
	// applied and recorded the events (each acquire: a grant and a lease;
	// the put).
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range c.Nodes {
		for n.Audit.Sync(); n.Audit.Written() < 2*acquires+1; n.Audit.Sync() {
			if time.Now().After(deadline) {
				t.Fatalf("node recorded only %d events", n.Audit.Written())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	sum, perNode := scrape(t, c)
	if got := series(sum, "warden_raft_proposals_pending", `shard="2"`) + series(sum, "warden_raft_proposals_pending", `shard="3"`); got != 0 {
		t.Errorf("proposals pending after the traffic settled: %v", got)
	}
	if got := series(sum, "warden_raft_proposals_failed_total"); got != 0 {
		t.Errorf("proposals failed with a healthy cluster: %v", got)
	}
	if got := series(sum, "warden_watchers"); got != 1 {
		t.Errorf("watch subscribers: %v, want 1", got)
	}
	stopWatch()
	if got := series(perNode[0], "warden_range_moves_total"); got != 2 {
		t.Errorf("range moves on node 1: %v, want 2", got)
	}
	if got := series(perNode[1], "warden_range_moves_total"); got != 0 {
		t.Errorf("range moves on node 2: %v, want 0", got)
	}
	for i, m := range perNode {
		// Each acquire applies a grant and a single-lock lease on every replica.
		if got := series(m, "warden_audit_records_written_total"); got < 2*acquires+1 {
			t.Errorf("node %d recorded %v audit events, want >= %d", i+1, got, 2*acquires)
		}
		if got := series(m, "warden_audit_records_dropped_total"); got != 0 {
			t.Errorf("node %d dropped %v audit events", i+1, got)
		}
	}

	// Without a quorum, what node 1 proposes cannot complete.
	c.StopNode(1)
	c.StopNode(2)
	for _, id := range c.Nodes[0].Host.ShardIDs() {
		s, _ := c.Nodes[0].Host.Shard(id)
		done := make(chan *wire.Response, 1)
		s.Submit(&wire.Request{Op: wire.OpKVPut, Path: "/ops/x/y", Value: []byte("v")}, func(r *wire.Response) { done <- r })
		if r := <-done; r.Code == wire.OK {
			t.Fatalf("shard %d committed a write without a quorum", id)
		}
	}
	one, _ := scrapeNodes(t, c.Nodes[:1])
	if got := series(one, "warden_raft_proposals_failed_total"); got < 1 {
		t.Errorf("proposals failed without a quorum: %v, want >= 1", got)
	}
	if got := series(one, "warden_raft_proposals_pending"); got != 0 {
		t.Errorf("proposals still pending after they were answered: %v", got)
	}
}

// TestSnapshotCounters: every replica's snapshots show as saved once its
// log passes --snapshot-log-bytes, and a restarted node counts the
// snapshot it recovered its state from.
func TestSnapshotCounters(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Shards: 1, Edit: func(cfg *node.Config) {
		cfg.AdminAddr = "127.0.0.1:0"
		cfg.SnapshotEntries = 1 << 30
		cfg.Shard.SnapshotLogBytes = 64 << 10
	}})
	ctx, cl := dial(t, c, 90*time.Second)
	value := make([]byte, 4000)
	for i := 0; i < 64; i++ { // 256 KB: several snapshots per replica
		if _, err := cl.Put(ctx, fmt.Sprintf("/snapcount/k%d/v", i%4), value); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, perNode := scrape(t, c)
		saved := 0
		for _, m := range perNode {
			if series(m, "warden_raft_snapshots_saved_total") >= 1 {
				saved++
			}
			if got := series(m, "warden_raft_snapshots_recovered_total"); got != 0 {
				t.Fatalf("snapshots recovered before any restart: %v", got)
			}
		}
		if saved == len(perNode) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d nodes report a saved snapshot", saved, len(perNode))
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.StopNode(2)
	c.StartNode(2)
	c.WaitReady(60 * time.Second)
	_, perNode := scrape(t, c)
	if got := series(perNode[2], "warden_raft_snapshots_recovered_total"); got < 1 {
		t.Fatalf("restarted node: %v snapshots recovered, want at least its own", got)
	}
}
