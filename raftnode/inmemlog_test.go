package raftnode

import "testing"

// The setting must be in force before any replica's log is created: a
// dragonboat whose internal/raft initialized after this package would have
// overwritten it with its own 512/96, silently.
func TestInMemLogSliceSetting(t *testing.T) {
	if dragonboatEntrySlice != entrySliceLen || dragonboatEntrySliceFree != entrySliceFree {
		t.Fatalf("dragonboat's in-memory log slice is %d entries (replaced below %d free), want %d (%d)",
			dragonboatEntrySlice, dragonboatEntrySliceFree, entrySliceLen, entrySliceFree)
	}
	if dragonboatEntrySliceFree >= dragonboatEntrySlice {
		t.Fatal("dragonboat panics when the free bound is not below the slice length")
	}
}
