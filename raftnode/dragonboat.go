package raftnode

import (
	_ "unsafe" // go:linkname

	_ "github.com/lni/dragonboat/v4" // it and its internal/raft are initialized first
)

// Every use of dragonboat's internals, in one place. Each rests on the
// pinned version (go.mod; TestPinnedDragonboat fails when it changes, and
// each is re-checked then) and is kept only for a measured gain:
//
//   - One send stream per peer (below): a linkname write into dragonboat's
//     unexported streamConnections. Measured at 8 shards, 1,024 clients:
//     with it 1.15× lock ops/s and 0.93× server CPU per operation (median
//     of 5 alternated pairs); the tree without it ran 0.84× the previous
//     tree's lock ops/s (10 pairs), with it 0.96× (5 pairs). Under heavy
//     machine load (load average 17) it measured 0.91× (4 pairs).
//   - The in-memory log slice (below): a linkname write into two unexported
//     variables of dragonboat's internal/raft. Measured: +8 % lock ops/s and −10 %
//     server CPU per operation at 8 shards, 1,024 clients (median of 4
//     alternated pairs; 1 shard unchanged).
//   - Send-first (sendfirst.go): the LogDB wrapper (passes.go) yields once
//     before a save whose Replicate no send goroutine has framed yet,
//     steered by a process-wide map of the highest index framed per shard.
//     Measured: +23 % lock ops/s at 1 shard and +44 % at 8 (median of 4 alternated
//     pairs, 1,024 clients).
//   - The commit hold (commithold.go): the transport holds a commit-only
//     Replicate, whose safety argument follows dragonboat's
//     internal/raft handling of Replicate and heartbeat messages.
//     Measured: +12 % hand-offs/s on one hot lock (32 clients, 1 shard)
//     and +15 % lock ops/s at 8 shards, 1,024 clients (medians of 4
//     alternated pairs).
//
// The transport (transport.go) and the counting LogDB wrapper (passes.go)
// use dragonboat's public plugin interfaces (raftio) only.

// dragonboatVersion is the dragonboat every use above was checked against.
const dragonboatVersion = "v4.0.0-20250723143628-076c7f6497dc"

// One send stream per peer. dragonboat queues a node's outgoing Raft
// messages per peer and per stream: streamConnections (a "soft setting",
// 4, read only from a JSON file in the working directory) splits each
// peer's messages over that many queues by shard id, each drained by its
// own goroutine into its own message batches. Warden's transport carries
// every stream to a peer on one connection and one write at a time
// (pairConn), so the extra streams buy no parallelism; they only cut one
// step pass's messages to a peer into up to four batches, woken, framed,
// written and received apart. One stream makes it one batch per peer per
// pass. The variable is dragonboat's package copy of the setting, read
// when a NodeHost starts; this package's init runs after dragonboat's. A
// dragonboat that renames it fails the link, not silently.
//
//go:linkname dragonboatStreams github.com/lni/dragonboat/v4.streamConnections
var dragonboatStreams uint64

// raftStreamsPerPeer is what dragonboatStreams is set to.
const raftStreamsPerPeer = 1

// The in-memory log slice. dragonboat keeps each replica's unapplied log
// entries in a slice (dragonboat's inmemory.go). Whenever a replica has
// applied everything it holds, or the slice is down to minEntrySliceSize
// (96) free slots, it allocates a fresh one of entrySliceSize (512)
// entries: 512 × 80 bytes, zeroed, 40 KiB. With 16 shards entries carry
// 4–16 operations and each replica drains its log after almost every
// apply, so that is 40 KiB per entry per replica. Warden's leaders keep at
// most MaxInflight (32) entries in flight, so a slice of 32 holds a full
// pipeline; a replica that holds more (a follower catching up) grows it by
// append as before.
//
// Both are "soft settings" (dragonboat reads them from a JSON file in the
// working directory); these are internal/raft's package copies, read when
// a replica's log is created and on every resize, and this package's init
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

// dragonboatDefaults is what the linknamed variables held before init
// changed them: the values the reasoning above was checked against.
var dragonboatDefaults struct{ streams, entrySlice, entrySliceFree uint64 }

func init() {
	dragonboatDefaults.streams = dragonboatStreams
	dragonboatDefaults.entrySlice, dragonboatDefaults.entrySliceFree = dragonboatEntrySlice, dragonboatEntrySliceFree
	dragonboatStreams = raftStreamsPerPeer
	dragonboatEntrySlice, dragonboatEntrySliceFree = entrySliceLen, entrySliceFree
}
