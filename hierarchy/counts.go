package hierarchy

import "github.com/wardenlock/warden/wire"

// The counters follow one rule: a request in mode m at node n conflicts with
// a hold (or an earlier queued request) in mode o at node x exactly when x is
// an ancestor of n, n itself, or inside n's subtree, and m or o is exclusive.
// Each node counts holds and waiters at itself and strictly below, by mode,
// so the check walks n's ancestors once.

// AddHeld records delta holds in mode m at n.
func (t *Trie[T]) AddHeld(n *Node[T], m wire.Mode, delta int) {
	i := modeIndex(m)
	n.held[i] = uint32(int(n.held[i]) + delta)
	for p := n.parent; p != nil; p = p.parent {
		p.kids.below[i] = uint32(int(p.kids.below[i]) + delta) // p has a child: n or an ancestor of n
	}
}

// AddQueued records delta waiters in mode m at n, and keeps each ancestor's
// list of children with waiters up to date.
func (t *Trie[T]) AddQueued(n *Node[T], m wire.Mode, delta int) {
	i := modeIndex(m)
	n.queued[i] = uint32(int(n.queued[i]) + delta)
	for c, p := n, n.parent; p != nil; c, p = p, p.parent {
		after := c.QueuedTotal()
		before := int(after) - delta
		if before == 0 && after > 0 {
			p.kids.markWaiting(c, true)
		} else if before > 0 && after == 0 {
			p.kids.markWaiting(c, false)
		}
		p.kids.qbelow[i] = uint32(int(p.kids.qbelow[i]) + delta)
	}
}

func modeIndex(m wire.Mode) int {
	if m == wire.Shared {
		return 1
	}
	return 0
}

// conflicting counts the entries of c that conflict with a request in mode m.
func conflicting(c [2]uint32, m wire.Mode) uint32 {
	if m == wire.Shared {
		return c[0]
	}
	return c[0] + c[1]
}

// HeldConflicts counts the holds that conflict with a request in mode m at
// n: on n's strict ancestors, at n, and strictly inside n's subtree.
func (n *Node[T]) HeldConflicts(m wire.Mode) (above, at, below uint32) {
	for p := n.parent; p != nil; p = p.parent {
		above += conflicting(p.held, m)
	}
	return above, conflicting(n.held, m), conflicting(n.belowCounts(), m)
}

// QueuedConflicts is HeldConflicts for queued requests.
func (n *Node[T]) QueuedConflicts(m wire.Mode) (above, at, below uint32) {
	for p := n.parent; p != nil; p = p.parent {
		above += conflicting(p.queued, m)
	}
	return above, conflicting(n.queued, m), conflicting(n.qbelowCounts(), m)
}

// HeldConflict reports whether any hold conflicts with mode m at n.
func (n *Node[T]) HeldConflict(m wire.Mode) bool {
	a, b, c := n.HeldConflicts(m)
	return a+b+c > 0
}

// QueuedConflict reports whether any queued request conflicts with mode m at n.
func (n *Node[T]) QueuedConflict(m wire.Mode) bool {
	a, b, c := n.QueuedConflicts(m)
	return a+b+c > 0
}

// Held returns the number of holds in mode m at n.
func (n *Node[T]) Held(m wire.Mode) uint32 { return n.held[modeIndex(m)] }

// HeldHere returns the number of holds at n in any mode.
func (n *Node[T]) HeldHere() uint32 { return n.held[0] + n.held[1] }

// HeldBelow returns the number of holds strictly inside n's subtree.
func (n *Node[T]) HeldBelow() uint32 {
	b := n.belowCounts()
	return b[0] + b[1]
}

// belowCounts returns the holds strictly inside n's subtree, by mode.
func (n *Node[T]) belowCounts() [2]uint32 {
	if n.kids == nil {
		return [2]uint32{}
	}
	return n.kids.below
}

// qbelowCounts returns the waiters strictly inside n's subtree, by mode.
func (n *Node[T]) qbelowCounts() [2]uint32 {
	if n.kids == nil {
		return [2]uint32{}
	}
	return n.kids.qbelow
}

// Queued returns the number of waiters at n in any mode.
func (n *Node[T]) Queued() uint32 { return n.queued[0] + n.queued[1] }

// QueuedTotal returns the number of waiters at n and inside its subtree.
func (n *Node[T]) QueuedTotal() uint32 {
	qb := n.qbelowCounts()
	return n.queued[0] + n.queued[1] + qb[0] + qb[1]
}

// HighestQueued returns the highest node on the line from the root to n
// (n included) that has waiters at itself, or nil.
func (n *Node[T]) HighestQueued() *Node[T] {
	var top *Node[T]
	for p := n; p != nil; p = p.parent {
		if p.Queued() > 0 {
			top = p
		}
	}
	return top
}
