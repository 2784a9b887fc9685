package hierarchy

// Walk visits n and its subtree in path order (pre-order, children sorted by
// name). enter decides whether a child's subtree is looked at at all (nil
// means always); it must not depend on the order it is asked in. visit
// returns false to stop the walk, and Walk then returns false. Small child
// sets are kept in order; a large one is filtered by enter first and only
// what is left is sorted, so a walk over a few held locks among a million
// children sorts a few. The trie must not change during a walk. This is for
// lookups and snapshots, never for Update.
func (n *Node[T]) Walk(enter func(*Node[T]) bool, visit func(*Node[T]) bool) bool {
	if !visit(n) {
		return false
	}
	k := n.kids
	if k == nil {
		return true
	}
	if !k.table {
		for _, c := range k.slots[:k.n] {
			if (enter == nil || enter(c)) && !c.Walk(enter, visit) {
				return false
			}
		}
		return true
	}
	var kids []*Node[T]
	for _, c := range k.slots {
		if c != nil && (enter == nil || enter(c)) {
			kids = append(kids, c)
		}
	}
	for _, c := range sortByName(kids) {
		if !c.Walk(enter, visit) {
			return false
		}
	}
	return true
}
