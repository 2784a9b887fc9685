package shard

import (
	"errors"
	"fmt"
	"os"

	"github.com/lni/dragonboat/v4/config"

	"github.com/wardenlock/warden/internal/raftwal"
)

// Raft log stores a node can keep its Raft log in (HostConfig.LogStore).
const (
	LogStorePebble = "pebble" // dragonboat's pebble LogDB
	LogStoreWAL    = "wal"    // Warden's own segmented log (internal/raftwal)
)

// DefaultLogStore is what a new data dir gets when none is asked for.
const DefaultLogStore = LogStoreWAL

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

// logStorePin records, in the data dir, which store the dir was created
// with: dragonboat cannot open a log written by another store. A dir
// written before the choice existed holds a pebble log.
var logStorePin = pinned{
	file: "log-store", flag: "--log-store", legacy: LogStorePebble, def: DefaultLogStore,
	valid: func(v string) error {
		if v == "" {
			return errors.New("no log store named")
		}
		return CheckLogStore(v)
	},
	mismatch: ErrLogStoreMismatch,
}

// resolveLogStore says which store dataDir uses. want is the store asked
// for ("" = whatever the dir has, DefaultLogStore for a new dir).
func resolveLogStore(dataDir, want string) (string, error) {
	if err := CheckLogStore(want); err != nil {
		return "", err
	}
	return logStorePin.resolve(dataDir, want)
}

// logDBFactory is the dragonboat LogDB factory for a store (nil: pebble);
// a wal store reports its syncs to stats.
func logDBFactory(store string, stats *raftwal.Stats) config.LogDBFactory {
	if store == LogStoreWAL {
		return countingLogDBFactory{raftwal.Factory{Options: raftwal.Options{Stats: stats}}}
	}
	return nil
}

// WALStats returns the node's Raft log store sync statistics, or nil when
// the store is not wal.
func (h *Host) WALStats() *raftwal.Stats { return h.walStats }
