package shard

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestLogStoreIsKeptPerDataDir(t *testing.T) {
	cases := []struct {
		name    string
		prepare func(dir string)
		want    string // asked for
		got     string // resolved ("" = error)
		err     error
	}{
		{"new dir, default", nil, "", DefaultLogStore, nil},
		{"new dir, wal", nil, LogStoreWAL, LogStoreWAL, nil},
		{"new dir, pebble", nil, LogStorePebble, LogStorePebble, nil},
		{"dir from before the flag is pebble", func(d string) { mkRaft(t, d) }, "", LogStorePebble, nil},
		{"dir from before the flag refuses wal", func(d string) { mkRaft(t, d) }, LogStoreWAL, "", ErrLogStoreMismatch},
		{"wal dir keeps wal", func(d string) { write(t, d, "wal\n"); mkRaft(t, d) }, "", LogStoreWAL, nil},
		{"wal dir refuses pebble", func(d string) { write(t, d, "wal\n") }, LogStorePebble, "", ErrLogStoreMismatch},
		{"unknown store asked", nil, "rocksdb", "", nil},
		{"unknown store recorded", func(d string) { write(t, d, "tan\n") }, "", "", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if c.prepare != nil {
				c.prepare(dir)
			}
			got, err := resolveLogStore(dir, c.want)
			if c.got == "" {
				if err == nil || (c.err != nil && !errors.Is(err, c.err)) {
					t.Fatalf("got %q, %v; want error %v", got, err, c.err)
				}
				return
			}
			if err != nil || got != c.got {
				t.Fatalf("got %q, %v; want %q", got, err, c.got)
			}
			// The choice is recorded: asking again with "" gives the same.
			again, err := resolveLogStore(dir, "")
			if err != nil || again != c.got {
				t.Fatalf("second open: %q, %v", again, err)
			}
		})
	}
}

func mkRaft(t *testing.T, dir string) {
	if err := os.MkdirAll(filepath.Join(dir, "raft", "host"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, dir, s string) {
	if err := os.WriteFile(filepath.Join(dir, logStorePin.file), []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
