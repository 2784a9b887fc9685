package main

import (
	"strings"
	"testing"
)

// The batching knobs reach every shard's config; 0 keeps the shard
// defaults, and a negative value is refused with the flag's name.
func TestServeBatchKnobs(t *testing.T) {
	for _, tc := range []struct {
		name             string
		ops, inflight    int
		wantErr          string
		wantOps, wantInf int
	}{
		{name: "defaults", ops: 0, inflight: 0},
		{name: "latency-bound leader", ops: 8, inflight: 1, wantOps: 8, wantInf: 1},
		{name: "negative ops", ops: -1, wantErr: "max-batch-ops"},
		{name: "negative inflight", inflight: -2, wantErr: "max-inflight-entries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := nodeConfig(fileConfig{ID: 1, Raft: "127.0.0.1:7170", MaxBatchOps: tc.ops, MaxInflight: tc.inflight})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Shard.MaxBatchOps != tc.wantOps || cfg.Shard.MaxInflight != tc.wantInf {
				t.Fatalf("shard config %d ops, %d in flight; want %d, %d", cfg.Shard.MaxBatchOps, cfg.Shard.MaxInflight, tc.wantOps, tc.wantInf)
			}
		})
	}
}

// --snapshot-entries reaches the node config; 0 keeps the shard default.
func TestServeSnapshotEntries(t *testing.T) {
	for _, n := range []uint64{0, 5000, 250000} {
		cfg, err := nodeConfig(fileConfig{ID: 1, Raft: "127.0.0.1:7170", SnapshotEntries: n})
		if err != nil {
			t.Fatal(err)
		}
		if cfg.SnapshotEntries != n {
			t.Fatalf("snapshot entries %d, want %d", cfg.SnapshotEntries, n)
		}
	}
}
