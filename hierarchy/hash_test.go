package hierarchy

import (
	"fmt"
	"strings"
	"testing"
)

// TestNameWordsDetermineTheName: two different segments of one length never
// pack into the same words, so the short hash sees every byte. Every
// segment of each length up to shortName that differs from a base in one
// byte, at each position, over bytes that matter for the loads.
func TestNameWordsDetermineTheName(t *testing.T) {
	for n := 1; n <= shortName; n++ {
		base := strings.Repeat("a", n)
		seen := map[[2]uint64]string{}
		a, b := nameWords(base)
		seen[[2]uint64{a, b}] = base
		for i := 0; i < n; i++ {
			for _, c := range []byte{0x00, 'b', 0x7f, 0x80, 0xff} {
				v := []byte(base)
				v[i] = c
				a, b := nameWords(string(v))
				if other, ok := seen[[2]uint64{a, b}]; ok {
					t.Fatalf("length %d: %q and %q pack alike", n, other, v)
				}
				seen[[2]uint64{a, b}] = string(v)
			}
		}
	}
}

// TestHashNameSpreads: names as workloads make them (u<w>-<i>, short and
// similar) get distinct hashes but for the collisions chance allows (about
// one among 100k 32-bit hashes), and hashing is stable within a process.
func TestHashNameSpreads(t *testing.T) {
	seen := map[uint32]bool{}
	names := 0
	for w := 0; w < 10000; w++ {
		for i := 0; i < 10; i++ {
			name := fmt.Sprintf("u%d-%d", w, i)
			names++
			seen[hashName(name)] = true
			if hashName(name) != hashName(strings.Clone(name)) {
				t.Fatalf("hashName(%q) is not stable", name)
			}
		}
	}
	long := strings.Repeat("x", shortName+1)
	if hashName(long) != hashName(strings.Clone(long)) {
		t.Fatal("the long-name hash is not stable")
	}
	if collisions := names - len(seen); collisions > 20 {
		t.Fatalf("%d of %d names collide", collisions, names)
	}
}

// TestHashNameFillsTablesEvenly: the low bits (a table's index) spread too.
// Linear probing at load a displaces a key by (1/(1-a) - 1)/2 slots on
// average when hashes are uniform; workload-like names must stay near that.
func TestHashNameFillsTablesEvenly(t *testing.T) {
	for _, format := range []string{"k-%d", "u%d-3", "lock%d", "%08d"} {
		const n, size = 100000, 1 << 18 // load 0.38
		slots := make([]bool, size)
		total := 0
		for i := 0; i < n; i++ {
			at := int(hashName(fmt.Sprintf(format, i))) & (size - 1)
			for slots[at] {
				at = (at + 1) & (size - 1)
				total++
			}
			slots[at] = true
		}
		load := float64(n) / size
		uniform := (1/(1-load) - 1) / 2
		if avg := float64(total) / n; avg > 1.5*uniform {
			t.Fatalf("%q: average displacement %.2f, uniform hashing gives %.2f", format, avg, uniform)
		}
	}
}
