package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The batching knobs (--max-batch-ops, --max-inflight-entries,
// --node-inflight-entries, --entry-linger, --queue-hold) reach every shard's config; 0 or
// empty keeps the shard defaults, and a value that means nothing is refused
// with the flag's name.
func TestServeBatchKnobs(t *testing.T) {
	type shardKnobs struct {
		ops, inflight, slots int
		linger, hold         time.Duration
	}
	for _, tc := range []struct {
		name    string
		in      fileConfig
		want    shardKnobs
		wantErr string
	}{
		{name: "defaults"},
		{name: "latency-bound leader", in: fileConfig{MaxBatchOps: 8, MaxInflight: 1}, want: shardKnobs{ops: 8, inflight: 1}},
		{name: "node bound", in: fileConfig{NodeInflight: 4, EntryLinger: "20ms"}, want: shardKnobs{slots: 4, linger: 20 * time.Millisecond}},
		{name: "negative ops", in: fileConfig{MaxBatchOps: -1}, wantErr: "max-batch-ops"},
		{name: "negative inflight", in: fileConfig{MaxInflight: -2}, wantErr: "max-inflight-entries"},
		{name: "negative slots", in: fileConfig{NodeInflight: -1}, wantErr: "node-inflight-entries"},
		{name: "queue hold", in: fileConfig{QueueHold: "5ms"}, want: shardKnobs{hold: 5 * time.Millisecond}},
		{name: "queue hold off", in: fileConfig{QueueHold: "0"}, want: shardKnobs{hold: -1}},
		{name: "negative queue hold", in: fileConfig{QueueHold: "-1ms"}, wantErr: "queue-hold"},
		{name: "bad queue hold", in: fileConfig{QueueHold: "brief"}, wantErr: "queue-hold"},
		{name: "bad linger", in: fileConfig{EntryLinger: "soon"}, wantErr: "entry-linger"},
		{name: "zero linger", in: fileConfig{EntryLinger: "0s"}, wantErr: "entry-linger"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.ID, tc.in.Raft = 1, "127.0.0.1:7170"
			cfg, err := nodeConfig(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := shardKnobs{cfg.Shard.MaxBatchOps, cfg.Shard.MaxInflight, cfg.Shard.NodeInflight, cfg.Shard.EntryLinger, cfg.Shard.QueueHold}
			if got != tc.want {
				t.Fatalf("shard config %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A config file sets the batching knobs (they were flags only before).
func TestServeBatchingFromConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "warden.yaml")
	yaml := "max-batch-ops: 8\nmax-inflight-entries: 1\nnode-inflight-entries: 4\nentry-linger: 20ms\nqueue-hold: 3ms\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var fc fileConfig
	if err := loadFileConfig(path, &fc, serveCmd()); err != nil {
		t.Fatal(err)
	}
	if fc.MaxBatchOps != 8 || fc.MaxInflight != 1 || fc.NodeInflight != 4 || fc.EntryLinger != "20ms" || fc.QueueHold != "3ms" {
		t.Fatalf("from file: %d ops, %d in flight, node %d, linger %q", fc.MaxBatchOps, fc.MaxInflight, fc.NodeInflight, fc.EntryLinger)
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

// --step-workers reaches the node config (0 keeps the data dir's), comes
// from a config file too, and a value that means nothing is refused with
// the flag's name.
func TestServeStepWorkers(t *testing.T) {
	for _, n := range []int{0, 1, 4, maxStepWorkers} {
		cfg, err := nodeConfig(fileConfig{ID: 1, Raft: "127.0.0.1:7170", StepWorkers: n})
		if err != nil {
			t.Fatal(err)
		}
		if cfg.StepWorkers != uint64(n) {
			t.Fatalf("step workers %d, want %d", cfg.StepWorkers, n)
		}
	}
	for _, n := range []int{-1, maxStepWorkers + 1} {
		if _, err := nodeConfig(fileConfig{ID: 1, Raft: "127.0.0.1:7170", StepWorkers: n}); err == nil || !strings.Contains(err.Error(), "step-workers") {
			t.Fatalf("step workers %d: err = %v, want one naming step-workers", n, err)
		}
	}
	path := filepath.Join(t.TempDir(), "warden.yaml")
	if err := os.WriteFile(path, []byte("step-workers: 6\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var fc fileConfig
	if err := loadFileConfig(path, &fc, serveCmd()); err != nil {
		t.Fatal(err)
	}
	if fc.StepWorkers != 6 {
		t.Fatalf("from file: %d step workers, want 6", fc.StepWorkers)
	}
}
