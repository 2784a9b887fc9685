package shard

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/lni/dragonboat/v4/config"

	"github.com/wardenlock/warden/internal/atomicfile"
	"github.com/wardenlock/warden/internal/raftwal"
)

// Raft log stores a node can keep its Raft log in (HostConfig.LogStore).
const (
	LogStorePebble = "pebble" // dragonboat's pebble LogDB
	LogStoreWAL    = "wal"    // Warden's own segmented log (internal/raftwal)
)

// DefaultLogStore is what a new data dir gets when none is asked for.
const DefaultLogStore = LogStoreWAL

// logStoreFile records, in the data dir, which store the dir was created
// with: dragonboat cannot open a log written by another store.
const logStoreFile = "log-store"

// ErrLogStoreMismatch: the data dir holds a Raft log of another store.
var ErrLogStoreMismatch = errors.New("shard: the data dir was created with another Raft log store")

// LogStoreFromEnv is the store tests run with: WARDEN_LOG_STORE (empty:
// the data dir's own, or the default for a new one).
func LogStoreFromEnv() string { return os.Getenv("WARDEN_LOG_STORE") }

// CheckLogStore refuses a name that is not a log store ("" is: the data
// dir's own, or the default).
func CheckLogStore(name string) error {
	switch name {
	case "", LogStorePebble, LogStoreWAL:
		return nil
	}
	return fmt.Errorf("shard: log store %q: want %q or %q", name, LogStoreWAL, LogStorePebble)
}

// resolveLogStore says which store dataDir uses. want is the store asked
// for ("" = whatever the dir has, DefaultLogStore for a new dir). A dir
// written before the choice existed holds a pebble log.
func resolveLogStore(dataDir, want string) (string, error) {
	if err := CheckLogStore(want); err != nil {
		return "", err
	}
	have := ""
	b, err := os.ReadFile(filepath.Join(dataDir, logStoreFile))
	switch {
	case err == nil:
		have = strings.TrimSpace(string(b))
		if have != LogStorePebble && have != LogStoreWAL {
			return "", fmt.Errorf("shard: %s names an unknown log store %q", filepath.Join(dataDir, logStoreFile), have)
		}
	case errors.Is(err, os.ErrNotExist):
		if des, _ := os.ReadDir(filepath.Join(dataDir, "raft")); len(des) > 0 {
			have = LogStorePebble
		}
	default:
		return "", err
	}
	if have != "" {
		if want != "" && want != have {
			return "", fmt.Errorf("%w: %s holds a %q log, --log-store asks for %q (start with --log-store %s, or use a new data dir)",
				ErrLogStoreMismatch, dataDir, have, want, have)
		}
		return have, nil
	}
	if want == "" {
		want = DefaultLogStore
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return "", err
	}
	if err := atomicfile.Write(filepath.Join(dataDir, logStoreFile), []byte(want+"\n"), 0o644); err != nil {
		return "", err
	}
	return want, nil
}

// logDBFactory is the dragonboat LogDB factory for a store (nil: pebble);
// a wal store reports its syncs to stats.
func logDBFactory(store string, stats *raftwal.Stats) config.LogDBFactory {
	if store == LogStoreWAL {
		return raftwal.Factory{Options: raftwal.Options{Stats: stats}}
	}
	return nil
}

// WALStats returns the node's Raft log store sync statistics, or nil when
// the store is not wal.
func (h *Host) WALStats() *raftwal.Stats { return h.walStats }
