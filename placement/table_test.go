package placement

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/wardenlock/warden/wire"
)

func testTable(shards int) *Table {
	ids := make([]uint64, shards)
	for i := range ids {
		ids[i] = uint64(i + 2)
	}
	return &Table{Gen: 1, NamespaceDepth: 2, Ranges: EvenRanges(ids, 1)}
}

func TestEvenRangesTileTheKeySpace(t *testing.T) {
	for _, n := range []int{1, 2, 3, 8, 16} {
		rs := testTable(n).Ranges
		if rs[0].Start != "" || rs[len(rs)-1].End != "" {
			t.Fatalf("%d shards: ranges do not cover both ends", n)
		}
		for i := 1; i < len(rs); i++ {
			if rs[i].Start != rs[i-1].End || rs[i].Start <= rs[i-1].Start {
				t.Fatalf("%d shards: gap or overlap between range %d and %d", n, i-1, i)
			}
		}
	}
}

func TestLocateSpreadsNamespaces(t *testing.T) {
	tab := testTable(8)
	seen := map[uint64]int{}
	for i := 0; i < 800; i++ {
		r, err := tab.Locate(fmt.Sprintf("/bench/c-%d/k", i))
		if err != nil {
			t.Fatal(err)
		}
		seen[r.Shard]++
	}
	if len(seen) != 8 {
		t.Fatalf("800 namespaces landed on %d of 8 shards: %v", len(seen), seen)
	}
	for s, n := range seen {
		if n < 40 {
			t.Errorf("shard %d got only %d of 800 namespaces", s, n)
		}
	}
}

func TestLocateShallowPath(t *testing.T) {
	if _, err := testTable(8).Locate("/locks"); !errors.Is(err, wire.ErrSpansRanges) {
		t.Fatalf("got %v, want SpansRanges", err)
	}
	r, err := testTable(1).Locate("/locks")
	if err != nil || r.Shard != 2 {
		t.Fatalf("single range must own shallow paths: %v %v", r, err)
	}
}

func TestMetaInitOnceAndSnapshot(t *testing.T) {
	m := NewMeta()
	cmd, _ := InitCommand(testTable(2))
	if r := m.Apply(cmd); r.Value != 1 {
		t.Fatal("first init must apply")
	}
	other, _ := InitCommand(testTable(5))
	if r := m.Apply(other); r.Value != 0 {
		t.Fatal("second init must be ignored")
	}
	nc, _ := NodeCommand(Node{ID: 1, ClientAddr: "127.0.0.1:7070"})
	m.Apply(nc)
	m.Apply([]byte{0xc1}) // garbage is ignored, not fatal
	var buf bytes.Buffer
	if err := m.SaveSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	m2 := NewMeta()
	if err := m2.RecoverFromSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	h1, _ := m.GetHash()
	h2, _ := m2.GetHash()
	if h1 != h2 {
		t.Fatal("recovered meta differs")
	}
	v, _ := m2.Lookup(TableQuery{})
	tab := v.(*Table)
	if len(tab.Ranges) != 2 || len(tab.Nodes) != 1 || tab.Nodes[0].ClientAddr != "127.0.0.1:7070" {
		t.Fatalf("unexpected table %+v", tab)
	}
}

// The router locates every request it routes: no allocation for that.
func TestLocateDoesNotAllocate(t *testing.T) {
	tab := testTable(8)
	if n := testing.AllocsPerRun(100, func() { _, _ = tab.Locate("/bench/w17-3/lock") }); n != 0 {
		t.Fatalf("Locate allocates %v times per call", n)
	}
}
