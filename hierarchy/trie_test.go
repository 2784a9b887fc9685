package hierarchy

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/wardenlock/warden/wire"
)

type payload struct{ used bool }

func inUse(n *Node[payload]) bool { return n.Val.used }

func TestEnsureFindPath(t *testing.T) {
	tr := New[payload]()
	cases := []struct {
		name, path string
		depth      int
	}{
		{"root", "/", 0},
		{"one", "/a", 1},
		{"deep", "/a/b/c/d", 4},
		{"sibling", "/a/x", 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := tr.Ensure(tc.path)
			if got := n.Path(); got != tc.path {
				t.Fatalf("Path() = %q, want %q", got, tc.path)
			}
			if n.Depth() != tc.depth {
				t.Fatalf("Depth() = %d, want %d", n.Depth(), tc.depth)
			}
			if tr.Find(tc.path) != n {
				t.Fatal("Find did not return the ensured node")
			}
		})
	}
	if tr.Len() != 5 {
		t.Fatalf("Len() = %d, want 5 (a, b, c, d, x)", tr.Len())
	}
	if tr.Find("/a/b/zz") != nil {
		t.Fatal("Find invented a node")
	}
}

func TestPruneStopsAtUsedOrBusyNodes(t *testing.T) {
	tr := New[payload]()
	keep := tr.Ensure("/a/b")
	keep.Val.used = true
	leaf := tr.Ensure("/a/b/c/d")
	tr.Prune(leaf, inUse)
	if tr.Find("/a/b/c") != nil || !leaf.Detached() {
		t.Fatal("idle nodes below a used node were not pruned")
	}
	if tr.Find("/a/b") != keep || tr.Len() != 2 {
		t.Fatalf("prune went past a used node; Len = %d", tr.Len())
	}
	held := tr.Ensure("/h")
	tr.AddHeld(held, wire.Shared, 1)
	tr.Prune(held, inUse)
	if tr.Find("/h") == nil {
		t.Fatal("a node with a hold was pruned")
	}
}

// TestManyKidsMatchAMap drives the dense list and the hash table through
// growth, deletion (backward shift) and shrinking, against a Go map.
func TestManyKidsMatchAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tr := New[payload]()
	root := tr.Root()
	want := map[string]*Node[payload]{}
	for step := 0; step < 20000; step++ {
		name := fmt.Sprintf("k%d", rng.IntN(600))
		if rng.IntN(3) > 0 {
			n := tr.EnsureChild(root, name)
			if old, ok := want[name]; ok && old != n {
				t.Fatalf("step %d: EnsureChild made a second %q", step, name)
			}
			want[name] = n
		} else if n := root.Child(name); n != nil {
			tr.Prune(n, inUse)
			delete(want, name)
		}
		if step%997 == 0 {
			checkKids(t, root, want)
		}
	}
	for name, n := range want {
		tr.Prune(n, inUse)
		delete(want, name)
	}
	checkKids(t, root, want)
}

func checkKids(t *testing.T, n *Node[payload], want map[string]*Node[payload]) {
	t.Helper()
	if n.NumKids() != len(want) {
		t.Fatalf("NumKids = %d, want %d", n.NumKids(), len(want))
	}
	for name, c := range want {
		if n.Child(name) != c {
			t.Fatalf("Child(%q) lost", name)
		}
	}
	kids := n.SortedKids(nil)
	if !slices.IsSortedFunc(kids, func(a, b *Node[payload]) int {
		if a.Name() < b.Name() {
			return -1
		}
		return 1
	}) || len(kids) != len(want) {
		t.Fatal("SortedKids is not a sorted list of every child")
	}
}

func TestWalkIsInPathOrder(t *testing.T) {
	tr := New[payload]()
	paths := []string{"/b", "/a/z", "/a/b/c", "/a", "/a/b", "/c/d"}
	for _, p := range paths {
		tr.Ensure(p)
	}
	var got []string
	tr.Root().Walk(nil, func(n *Node[payload]) bool {
		got = append(got, n.Path())
		return true
	})
	want := []string{"/", "/a", "/a/b", "/a/b/c", "/a/z", "/b", "/c", "/c/d"}
	if !slices.Equal(got, want) {
		t.Fatalf("walk order %v, want %v", got, want)
	}
}

// TestWalkFiltersThenSorts: a large child set is filtered by enter and the
// rest visited in name order; small sets stay in order as they change.
func TestWalkFiltersThenSorts(t *testing.T) {
	tr := New[payload]()
	var want []string
	for i := 99; i >= 0; i-- {
		p := fmt.Sprintf("/k/%02d", i)
		n := tr.Ensure(p)
		if i%7 == 0 {
			n.Val.used = true
			want = append([]string{p}, want...)
		}
	}
	var got []string
	tr.Find("/k").Walk(func(n *Node[payload]) bool { return n.Val.used }, func(n *Node[payload]) bool {
		if n.Val.used {
			got = append(got, n.Path())
		}
		return true
	})
	if !slices.Equal(got, want) {
		t.Fatalf("walk visited %v, want %v", got, want)
	}
	small := tr.Ensure("/s")
	for _, name := range []string{"d", "a", "c", "b"} {
		tr.EnsureChild(small, name)
	}
	tr.Prune(tr.Find("/s/c"), inUse)
	var names []string
	for _, c := range small.SortedKids(nil) {
		names = append(names, c.Name())
	}
	if !slices.Equal(names, []string{"a", "b", "d"}) {
		t.Fatalf("small child list %v is not in name order", names)
	}
}

// An interior node with one or two children keeps them in its child set's
// own slots: making a new /a/<name>/lock (and pruning it) costs the two
// nodes, their names and the child set, nothing for the child lists.
func TestSmallChildListsDoNotAllocate(t *testing.T) {
	tr := New[int]()
	tr.Ensure("/a/keep")
	n := testing.AllocsPerRun(100, func() {
		tr.Prune(tr.Ensure("/a/name/lock"), func(*Node[int]) bool { return false })
	})
	if n > 5 {
		t.Fatalf("%v allocations to make and prune /a/name/lock, want 5 (two nodes, two names, one child set)", n)
	}
	if tr.Len() != 2 {
		t.Fatalf("%d nodes left, want /a and /a/keep", tr.Len())
	}
}

// TestDenseListsFindByName: a small child list is searched by name alone
// (no hash), so names of one length, prefixes and the empty-looking cases
// must all be told apart, as they are once the list becomes a table.
func TestDenseListsFindByName(t *testing.T) {
	names := []string{"ab", "ba", "a", "abc", "aa", "b", "lock", "lack"}
	for _, size := range []int{1, len(names), smallKids + 1} {
		tr := New[payload]()
		root := tr.Root()
		want := map[string]*Node[payload]{}
		for i := 0; i < size; i++ {
			name := fmt.Sprintf("x%d", i)
			if i < len(names) {
				name = names[i]
			}
			want[name] = tr.EnsureChild(root, name)
		}
		checkKids(t, root, want)
		for _, absent := range []string{"bb", "abd", "c", "loc", "locks", "x"} {
			if root.Child(absent) != nil || tr.Find("/"+absent) != nil {
				t.Fatalf("%d children: found absent %q", size, absent)
			}
		}
		for name, n := range want {
			if tr.Find("/"+name) != n || tr.EnsureChild(root, name) != n {
				t.Fatalf("%d children: %q not found as itself", size, name)
			}
		}
	}
}
