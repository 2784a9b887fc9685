package raftnode

import (
	_ "unsafe" // go:linkname

	_ "github.com/lni/dragonboat/v4" // its internal/raft is initialized first
)

// dragonboat keeps each replica's unapplied log entries in a slice
// (internal/raft/inmemory.go). Whenever a replica has applied everything
// it holds, or the slice is down to MinEntrySliceFreeSize (96) free slots,
// it allocates a fresh one of InMemEntrySliceSize (512) entries: 512 × 80
// bytes, zeroed, 40 KiB. With one shard and 1,024 clients an entry carries
// hundreds of operations and that happens rarely; with 16 shards entries
// carry 4–16 operations and each replica drains its log after almost every
// apply, so it is 40 KiB per entry per replica: at 16 shards on 3 nodes
// 1.7 KB of the 5.8 KB allocated per operation and ≈ 1 µs of the ≈ 40 µs
// of server CPU per operation in memclr alone, plus its share of the
// collector's work (docs/bench/shards10-session10.md). Warden's leaders keep
// at most MaxInflight (32) entries in flight, so a slice of 32 holds a
// full pipeline; a replica that holds more (a follower catching up) grows
// it by append as before.
//
// Both are "soft settings" (dragonboat reads them from a JSON file in the
// working directory); these are internal/raft's package copies, read when a
// replica's log is created and on every resize, and this package's init
// runs after internal/raft's. A dragonboat that renames them fails the
// link, not silently.
//
//go:linkname dragonboatEntrySlice github.com/lni/dragonboat/v4/internal/raft.entrySliceSize
var dragonboatEntrySlice uint64

//go:linkname dragonboatEntrySliceFree github.com/lni/dragonboat/v4/internal/raft.minEntrySliceSize
var dragonboatEntrySliceFree uint64

// The slice a drained log starts again with, and the free slots below
// which it is replaced (dragonboat panics unless free < slice).
const (
	entrySliceLen  = 32
	entrySliceFree = 8
)

func init() { dragonboatEntrySlice, dragonboatEntrySliceFree = entrySliceLen, entrySliceFree }
