package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// --node-inflight-entries and --entry-linger reach the shard config, and
// values that mean nothing are refused.
func TestServeNodeInflightFlags(t *testing.T) {
	for _, tc := range []struct {
		name       string
		slots      int
		linger     string
		wantSlots  int
		wantLinger time.Duration
		wantErr    string
	}{
		{name: "defaults (no bound)"},
		{name: "bounded", slots: 4, linger: "20ms", wantSlots: 4, wantLinger: 20 * time.Millisecond},
		{name: "negative slots", slots: -1, wantErr: "node-inflight-entries"},
		{name: "bad linger", linger: "soon", wantErr: "entry-linger"},
		{name: "zero linger", linger: "0s", wantErr: "entry-linger"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := nodeConfig(fileConfig{ID: 1, Raft: "127.0.0.1:7170", NodeInflight: tc.slots, EntryLinger: tc.linger})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Shard.NodeInflight != tc.wantSlots || cfg.Shard.EntryLinger != tc.wantLinger {
				t.Fatalf("shard config %d slots, linger %v; want %d, %v", cfg.Shard.NodeInflight, cfg.Shard.EntryLinger, tc.wantSlots, tc.wantLinger)
			}
		})
	}
}

// A config file sets the batching knobs (they were flags only before).
func TestServeBatchingFromConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "warden.yaml")
	yaml := "max-batch-ops: 8\nmax-inflight-entries: 1\nnode-inflight-entries: 4\nentry-linger: 20ms\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var fc fileConfig
	if err := loadFileConfig(path, &fc, serveCmd()); err != nil {
		t.Fatal(err)
	}
	if fc.MaxBatchOps != 8 || fc.MaxInflight != 1 || fc.NodeInflight != 4 || fc.EntryLinger != "20ms" {
		t.Fatalf("from file: %d ops, %d in flight, node %d, linger %q", fc.MaxBatchOps, fc.MaxInflight, fc.NodeInflight, fc.EntryLinger)
	}
}
