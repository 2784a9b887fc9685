package hierarchy

import (
	"testing"

	"github.com/wardenlock/warden/wire"
)

const (
	ex = wire.Exclusive
	sh = wire.Shared
)

// TestHierarchicalConflicts covers every placement of an existing hold
// relative to a new request (same node, ancestor, descendant, unrelated) in
// every pair of modes, in both orders: which one was taken first does not
// matter to the counters, and the table says so by running each case twice.
func TestHierarchicalConflicts(t *testing.T) {
	cases := []struct {
		name       string
		first      string
		firstMode  wire.Mode
		second     string
		secondMode wire.Mode
		conflict   bool
	}{
		{"same path ex/ex", "/a/b", ex, "/a/b", ex, true},
		{"same path ex/sh", "/a/b", ex, "/a/b", sh, true},
		{"same path sh/ex", "/a/b", sh, "/a/b", ex, true},
		{"same path sh/sh", "/a/b", sh, "/a/b", sh, false},
		{"parent ex, child ex", "/a", ex, "/a/b/c", ex, true},
		{"parent ex, child sh", "/a", ex, "/a/b/c", sh, true},
		{"parent sh, child ex", "/a", sh, "/a/b/c", ex, true},
		{"parent sh, child sh", "/a", sh, "/a/b/c", sh, false},
		{"child ex, parent ex", "/a/b/c", ex, "/a", ex, true},
		{"child ex, parent sh", "/a/b/c", ex, "/a", sh, true},
		{"child sh, parent ex", "/a/b/c", sh, "/a", ex, true},
		{"child sh, parent sh", "/a/b/c", sh, "/a", sh, false},
		{"root ex covers all", "/", ex, "/x/y", sh, true},
		{"siblings ex/ex", "/a/b", ex, "/a/c", ex, false},
		{"cousins ex/ex", "/a/b/c", ex, "/a/d/c", ex, false},
		{"name prefix is not a parent", "/a/b", ex, "/a/bc", ex, false},
	}
	for _, tc := range cases {
		for _, held := range []bool{true, false} {
			kind := "queued"
			if held {
				kind = "held"
			}
			t.Run(tc.name+"/"+kind, func(t *testing.T) {
				tr := New[payload]()
				add := tr.AddQueued
				check := (*Node[payload]).QueuedConflict
				if held {
					add, check = tr.AddHeld, (*Node[payload]).HeldConflict
				}
				add(tr.Ensure(tc.first), tc.firstMode, 1)
				if got := check(tr.Ensure(tc.second), tc.secondMode); got != tc.conflict {
					t.Fatalf("%s %s then %s %s: conflict = %v, want %v",
						tc.first, tc.firstMode, tc.second, tc.secondMode, got, tc.conflict)
				}
				// The relation is symmetric: the reverse order decides the same.
				tr2 := New[payload]()
				add2, check2 := tr2.AddQueued, (*Node[payload]).QueuedConflict
				if held {
					add2, check2 = tr2.AddHeld, (*Node[payload]).HeldConflict
				}
				add2(tr2.Ensure(tc.second), tc.secondMode, 1)
				if got := check2(tr2.Ensure(tc.first), tc.firstMode); got != tc.conflict {
					t.Fatalf("reverse order: conflict = %v, want %v", got, tc.conflict)
				}
			})
		}
	}
}

func TestCountersReturnToZero(t *testing.T) {
	tr := New[payload]()
	a, c := tr.Ensure("/a"), tr.Ensure("/a/b/c")
	tr.AddHeld(c, ex, 1)
	tr.AddQueued(c, sh, 1)
	if above, at, below := a.HeldConflicts(ex); above != 0 || at != 0 || below != 1 {
		t.Fatalf("HeldConflicts at /a = %d,%d,%d", above, at, below)
	}
	if a.QueuedTotal() != 1 || len(a.WaitingKids()) != 1 || tr.Root().WaitingKids()[0] != a {
		t.Fatal("waiting-children lists do not lead to the waiter")
	}
	if tr.Root().HighestQueued() != nil || c.HighestQueued() != c {
		t.Fatal("HighestQueued is wrong")
	}
	tr.AddHeld(c, ex, -1)
	tr.AddQueued(c, sh, -1)
	if a.HeldConflict(ex) || a.QueuedConflict(ex) || len(tr.Root().WaitingKids()) != 0 {
		t.Fatal("counters did not return to zero")
	}
	tr.Prune(c, inUse)
	if tr.Len() != 0 {
		t.Fatalf("Len = %d after pruning everything", tr.Len())
	}
}

func TestRelated(t *testing.T) {
	tr := New[payload]()
	a, ab, ac := tr.Ensure("/a"), tr.Ensure("/a/b"), tr.Ensure("/a/c")
	cases := []struct {
		name string
		x, y *Node[payload]
		want bool
	}{
		{"self", ab, ab, true},
		{"parent", a, ab, true},
		{"child", ab, a, true},
		{"siblings", ab, ac, false},
		{"root", tr.Root(), ac, true},
	}
	for _, tc := range cases {
		if Related(tc.x, tc.y) != tc.want {
			t.Errorf("%s: Related = %v", tc.name, !tc.want)
		}
	}
}
