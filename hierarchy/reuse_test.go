package hierarchy

import (
	"fmt"
	"slices"
	"testing"
	"unsafe"

	"github.com/wardenlock/warden/wire"
)

// TestReusedNodesStartEmpty: nodes and child sets pruned with a payload,
// counters and a waiting list behind them come back, after Recycle, as
// fresh nodes of another path: no payload, no counters, no children, no
// waiting children, the new name and parent.
func TestReusedNodesStartEmpty(t *testing.T) {
	tr := New[[]int]()
	idle := func(n *Node[[]int]) bool { return false }
	leaf := tr.Ensure("/a/b/c")
	old := []*Node[[]int]{tr.Find("/a"), tr.Find("/a/b"), leaf}
	for _, n := range old {
		n.Val = []int{7} // stale payload: the trie never reads Val
	}
	tr.AddQueued(leaf, wire.Shared, 1) // /a and /a/b list a waiting child
	tr.AddHeld(leaf, wire.Exclusive, 1)
	tr.AddQueued(leaf, wire.Shared, -1)
	tr.AddHeld(leaf, wire.Exclusive, -1)
	tr.Prune(leaf, idle)
	if tr.Len() != 0 {
		t.Fatalf("%d nodes left after pruning /a/b/c", tr.Len())
	}

	// Before Recycle nothing pruned is handed out: a caller may still hold it.
	fresh := tr.Ensure("/x/y")
	if slices.Contains(old, fresh) || slices.Contains(old, fresh.Parent()) {
		t.Fatal("a pruned node was reused before Recycle")
	}
	if !leaf.Detached() || leaf.Name() != "c" || leaf.Val[0] != 7 {
		t.Fatal("a pruned node changed before Recycle")
	}

	tr.Recycle()
	reused := 0
	for _, p := range []string{"/p", "/p/q", "/p/q/r", "/p/q/r/s"} {
		n := tr.Ensure(p)
		if slices.Contains(old, n) {
			reused++
		}
		if n.Path() != p || n.Name() != p[len(p)-1:] || tr.Find(p) != n {
			t.Fatalf("reused node answers %q (name %q) for %s", n.Path(), n.Name(), p)
		}
		if n.Val != nil || n.NumKids() != 0 || n.WaitingKids() != nil || n.Detached() {
			t.Fatalf("%s comes back with payload %v, %d children", p, n.Val, n.NumKids())
		}
		for _, m := range []wire.Mode{wire.Exclusive, wire.Shared} {
			if n.HeldConflict(m) || n.QueuedConflict(m) || n.QueuedTotal() != 0 {
				t.Fatalf("%s comes back with counters", p)
			}
		}
		if par := n.Parent(); len(par.WaitingKids()) != 0 || par.HeldBelow() != 0 || (!par.IsRoot() && par.NumKids() != 1) {
			t.Fatalf("%s's parent comes back with a stale child set", p)
		}
	}
	if reused != len(old) {
		t.Fatalf("%d of %d pruned nodes reused", reused, len(old))
	}
	if tr.Len() != 6 {
		t.Fatalf("Len() = %d, want 6", tr.Len())
	}
}

// TestReuseIsBounded: a mass prune keeps at most maxSpare nodes and child
// sets for reuse; the rest go to the garbage collector.
func TestReuseIsBounded(t *testing.T) {
	tr := New[int]()
	idle := func(*Node[int]) bool { return false }
	var leaves []*Node[int]
	for i := 0; i < 2*maxSpare; i++ {
		leaves = append(leaves, tr.Ensure(fmt.Sprintf("/n%d/lock", i)))
	}
	for _, n := range leaves {
		tr.Prune(n, idle)
	}
	tr.Recycle()
	if len(tr.spare) != maxSpare || len(tr.spareKids) != maxSpare || len(tr.pruned)+len(tr.prunedKids) != 0 {
		t.Fatalf("kept %d nodes and %d child sets, want %d each", len(tr.spare), len(tr.spareKids), maxSpare)
	}
}

// TestCycleReusesEverything: once a path has come and gone, making and
// pruning it again allocates nothing: the nodes and the child set are
// reused, the names shared.
func TestCycleReusesEverything(t *testing.T) {
	tr := New[int]()
	tr.Ensure("/a/keep")
	idle := func(*Node[int]) bool { return false }
	n := testing.AllocsPerRun(100, func() {
		tr.Prune(tr.Ensure("/a/name/lock"), idle)
		tr.Recycle()
	})
	if n != 0 {
		t.Fatalf("%v allocations to make and prune /a/name/lock again, want none", n)
	}
}

// TestNamesAreSharedNotAliased: nodes made with the same name share one
// copy, which is not the request's bytes (a caller may reuse its buffer).
func TestNamesAreSharedNotAliased(t *testing.T) {
	tr := New[int]()
	buf := []byte("/a/lock")
	a := tr.Ensure(unsafe.String(&buf[0], len(buf))) // a view, as a decoded request path is
	b := tr.Ensure("/b/lock")
	if unsafe.StringData(a.Name()) != unsafe.StringData(b.Name()) {
		t.Fatal("two nodes called lock hold two copies of the name")
	}
	copy(buf, "/a/xxxx")
	if a.Name() != "lock" || tr.Find("/a/lock") != a {
		t.Fatalf("a node's name follows the request's bytes: %q", a.Name())
	}
}
