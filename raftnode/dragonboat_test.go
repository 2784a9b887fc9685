package raftnode

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

const dragonboatModule = "github.com/lni/dragonboat/v4"

// The uses of dragonboat's internals (dragonboat.go) were checked against
// one version. When go.mod pins another, or the binary links another, or
// the linknamed variables no longer start at the values the reasoning
// assumed, this fails: re-check each use listed in dragonboat.go, then
// update dragonboatVersion.
func TestPinnedDragonboat(t *testing.T) {
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	pinned := ""
	for _, line := range strings.Split(string(mod), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == dragonboatModule {
			pinned = f[1]
		}
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "replace" && f[1] == dragonboatModule {
			t.Fatalf("go.mod replaces dragonboat (%s): the uses in dragonboat.go were checked against %s only", strings.TrimSpace(line), dragonboatVersion)
		}
	}
	if pinned != dragonboatVersion {
		t.Fatalf("go.mod pins dragonboat %q; dragonboat.go was checked against %s: re-check its uses of dragonboat's internals", pinned, dragonboatVersion)
	}
	// What the build links: the module graph's choice (a replace included).
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}{{with .Replace}} => {{.Path}}@{{.Version}}{{end}}", dragonboatModule).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", dragonboatModule, err)
	}
	if linked := strings.TrimSpace(string(out)); linked != dragonboatVersion {
		t.Fatalf("the build links dragonboat %q, want %s", linked, dragonboatVersion)
	}
	if d := dragonboatDefaults; d.streams != 4 {
		t.Fatalf("dragonboat started with %d send streams per peer, the reasoning assumed 4", d.streams)
	}
	if d := dragonboatDefaults; d.entrySlice != 512 || d.entrySliceFree != 96 {
		t.Fatalf("dragonboat's in-memory log slice started at %d entries (replaced below %d free), the reasoning assumed 512 and 96", d.entrySlice, d.entrySliceFree)
	}
}

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

// dragonboat runs the number of send streams per peer that this package
// sets.
func TestDragonboatRunsOneStreamPerPeer(t *testing.T) {
	if dragonboatStreams != raftStreamsPerPeer {
		t.Fatalf("dragonboat runs %d streams per peer, want %d", dragonboatStreams, raftStreamsPerPeer)
	}
}
