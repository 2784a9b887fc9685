package main

import (
	"strings"
	"testing"
	"time"
)

// The batching knobs (--max-batch-ops, --max-inflight-entries,
// --queue-hold) reach every shard's config; 0 or empty keeps the shard defaults, and a value that means nothing is refused
// with the flag's name.
func TestServeBatchKnobs(t *testing.T) {
	type shardKnobs struct {
		ops, inflight int
		hold          time.Duration
	}
	for _, tc := range []struct {
		name    string
		in      serveFlags
		want    shardKnobs
		wantErr string
	}{
		{name: "defaults"},
		{name: "latency-bound leader", in: serveFlags{MaxBatchOps: 8, MaxInflight: 1}, want: shardKnobs{ops: 8, inflight: 1}},
		{name: "negative ops", in: serveFlags{MaxBatchOps: -1}, wantErr: "max-batch-ops"},
		{name: "negative inflight", in: serveFlags{MaxInflight: -2}, wantErr: "max-inflight-entries"},
		{name: "queue hold", in: serveFlags{QueueHold: "5ms"}, want: shardKnobs{hold: 5 * time.Millisecond}},
		{name: "queue hold off", in: serveFlags{QueueHold: "0"}, want: shardKnobs{hold: -1}},
		{name: "negative queue hold", in: serveFlags{QueueHold: "-1ms"}, wantErr: "queue-hold"},
		{name: "bad queue hold", in: serveFlags{QueueHold: "brief"}, wantErr: "queue-hold"},
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
			got := shardKnobs{cfg.Shard.MaxBatchOps, cfg.Shard.MaxInflight, cfg.Shard.QueueHold}
			if got != tc.want {
				t.Fatalf("shard config %+v, want %+v", got, tc.want)
			}
		})
	}
}

// --snapshot-entries reaches the node config; 0 keeps the shard default.
func TestServeSnapshotEntries(t *testing.T) {
	for _, n := range []uint64{0, 5000, 250000} {
		cfg, err := nodeConfig(serveFlags{ID: 1, Raft: "127.0.0.1:7170", SnapshotEntries: n})
		if err != nil {
			t.Fatal(err)
		}
		if cfg.SnapshotEntries != n {
			t.Fatalf("snapshot entries %d, want %d", cfg.SnapshotEntries, n)
		}
	}
}

// --snapshot-log-bytes reaches the shard config as bytes, off as the
// shard's "entries only"; a size too small to be a bound, or not a size,
// is refused with a clear error.
func TestServeSnapshotLogBytes(t *testing.T) {
	for v, want := range map[string]int64{"": 0, "256MiB": 256 << 20, "1G": 1 << 30, "65536": 64 << 10, "off": -1, "OFF": -1} {
		cfg, err := nodeConfig(serveFlags{ID: 1, Raft: "127.0.0.1:7170", SnapshotBytes: v})
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		if cfg.Shard.SnapshotLogBytes != want {
			t.Fatalf("%q: snapshot log bytes %d, want %d", v, cfg.Shard.SnapshotLogBytes, want)
		}
	}
	for _, v := range []string{"0", "1KiB", "-5MiB", "lots", "9223372036854775807G"} {
		_, err := nodeConfig(serveFlags{ID: 1, Raft: "127.0.0.1:7170", SnapshotBytes: v})
		if err == nil || !strings.Contains(err.Error(), "snapshot-log-bytes") {
			t.Fatalf("%q: error %v, want one naming --snapshot-log-bytes", v, err)
		}
	}
}
