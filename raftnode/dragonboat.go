package raftnode

import (
	_ "unsafe" // go:linkname

	_ "github.com/lni/dragonboat/v4" // streamConnections is initialized first
)

// dragonboat queues a node's outgoing Raft messages per peer *and* per
// stream: StreamConnections (a "soft setting", 4, read only from a JSON
// file in the working directory) splits each peer's messages over that many
// queues by shard id, each drained by its own goroutine into its own message
// batches. Warden's transport carries every stream to a peer on one
// connection and one write at a time (pairConn), so the extra streams buy no
// parallelism; they only cut one step pass's messages to a peer into up to
// four batches, woken, framed, written and received apart, each waking the
// peer's step worker on its own. One stream makes it one batch per peer per
// pass: at 16 shards on 3 nodes, 13 messages of 7 shards per batch instead
// of 4 of 2, and 0.13–0.15 batches per operation instead of 0.48
// (docs/bench/round8-session8.md).
//
// The variable is dragonboat's package copy of the setting, read when a
// NodeHost starts; this package's init runs after dragonboat's, so every
// NodeHost of the process sees one stream. A dragonboat that renames it
// fails the link, not silently.
//
//go:linkname dragonboatStreams github.com/lni/dragonboat/v4.streamConnections
var dragonboatStreams uint64

// raftStreamsPerPeer is what dragonboatStreams is set to.
const raftStreamsPerPeer = 1

func init() { dragonboatStreams = raftStreamsPerPeer }
