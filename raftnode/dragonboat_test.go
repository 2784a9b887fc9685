package raftnode

import (
	"testing"
)

// dragonboat runs the number of send streams per peer that this package
// sets (streams.go).
func TestDragonboatRunsOneStreamPerPeer(t *testing.T) {
	if dragonboatStreams != raftStreamsPerPeer {
		t.Fatalf("dragonboat runs %d streams per peer, want %d", dragonboatStreams, raftStreamsPerPeer)
	}
}
