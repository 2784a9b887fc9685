package statemachine

import (
	"slices"

	"github.com/wardenlock/warden/hierarchy"
	"github.com/wardenlock/warden/wire"
)

// Hand-off: after holds or waiters disappear at some nodes, grant every
// waiter that no longer conflicts with a holder or with an earlier waiter
// that stays queued, in arrival order, inside the same command.
//
// Which waiters to look at: for a changed node P, let T be the highest node
// from the root down to P that has waiters at itself (P if none does). Every
// waiter the change could unblock is related to P, so lies in T's subtree;
// and no waiter outside T's subtree can conflict with one inside it (it
// would have to sit on an ancestor of T, which has none). So the candidates,
// T's subtree, are closed: deciding them needs nothing outside.
//
// Each node's queue is FIFO and once its head must wait, every later waiter
// there must too (it conflicts with the head or with what blocks the head).
// So the candidates are merged by arrival with a heap of per-node cursors,
// and a cursor is dropped at its first blocked waiter. A queue on one path
// costs O(grants + 1), however long it is.

type handoffScratch struct {
	roots   []*lockNode
	heap    []*waiter
	overlay []blocked
	seen    map[*lockNode]struct{}
}

// blocked is a node whose queue, from w on, stays queued this round.
type blocked struct {
	w       *waiter
	firstEx *waiter // first exclusive waiter from w on; found lazily
	scanned bool
}

func (s *StateMachine) handoff(changed ...*lockNode) {
	if s.trie.Root().QueuedTotal() == 0 {
		return // nobody waits anywhere (the root counts every waiter)
	}
	roots := s.regions(changed)
	if len(roots) == 0 {
		return
	}
	hs := &s.hand
	hs.heap, hs.overlay = hs.heap[:0], hs.overlay[:0]
	for _, t := range roots {
		s.collect(t)
	}
	for len(hs.heap) > 0 {
		w := hs.pop()
		if w.node.HeldConflict(w.mode) || hs.blockedByEarlier(w) || s.waitBlocked(w) {
			hs.overlay = append(hs.overlay, blocked{w: w})
			continue
		}
		next := w.next
		s.grantWaiter(w)
		if next != nil {
			hs.push(next)
		}
	}
	clear(hs.heap[:cap(hs.heap)])
	clear(hs.overlay[:cap(hs.overlay)])
}

// regions returns the subtree roots to look at, none inside another.
func (s *StateMachine) regions(changed []*lockNode) []*lockNode {
	hs := &s.hand
	hs.roots = hs.roots[:0]
	for _, p := range changed {
		t := p.HighestQueued()
		if t == nil {
			t = p
		}
		if t.QueuedTotal() > 0 {
			hs.roots = append(hs.roots, t)
		}
	}
	if len(hs.roots) <= 1 {
		return hs.roots
	}
	// Shallowest first, so a root is kept before anything under it. Which
	// duplicate survives does not matter: the result is a set.
	slices.SortFunc(hs.roots, func(a, b *lockNode) int { return a.Depth() - b.Depth() })
	if hs.seen == nil {
		hs.seen = map[*lockNode]struct{}{}
	}
	clear(hs.seen)
	out := hs.roots[:0]
	for _, t := range hs.roots {
		if !underAny(t, hs.seen) {
			hs.seen[t] = struct{}{}
			out = append(out, t)
		}
	}
	hs.roots = out
	return out
}

// underAny reports whether t or one of its ancestors is in set.
func underAny(t *lockNode, set map[*lockNode]struct{}) bool {
	for p := t; p != nil; p = p.Parent() {
		if _, ok := set[p]; ok {
			return true
		}
	}
	return false
}

// collect puts the queue head of every node under t (t included) that has
// waiters on the heap, following only children with waiters below them.
func (s *StateMachine) collect(t *lockNode) {
	if t.Queued() > 0 {
		s.hand.push(t.Val.ext.head)
	}
	for _, c := range t.WaitingKids() {
		s.collect(c)
	}
}

// blockedByEarlier reports whether w conflicts with a waiter that arrived
// before it and stays queued this round.
func (hs *handoffScratch) blockedByEarlier(w *waiter) bool {
	for i := range hs.overlay {
		b := &hs.overlay[i]
		if !hierarchy.Related(b.w.node, w.node) {
			continue
		}
		if w.mode == wire.Exclusive || b.w.mode == wire.Exclusive {
			return true
		}
		if !b.scanned {
			for x := b.w; x != nil; x = x.next {
				if x.mode == wire.Exclusive {
					b.firstEx = x
					break
				}
			}
			b.scanned = true
		}
		if b.firstEx != nil && b.firstEx.arrival < w.arrival {
			return true
		}
	}
	return false
}

// A binary min-heap of queue cursors by arrival.

func (hs *handoffScratch) push(w *waiter) {
	h := append(hs.heap, w)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if h[p].arrival <= h[i].arrival {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
	hs.heap = h
}

func (hs *handoffScratch) pop() *waiter {
	h := hs.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h[last] = nil
	h = h[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h) && h[l].arrival < h[m].arrival {
			m = l
		}
		if r < len(h) && h[r].arrival < h[m].arrival {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	hs.heap = h
	return top
}
