package hierarchy

// Walk visits n and its subtree in path order (pre-order, children sorted by
// name). enter decides whether a child's subtree is looked at at all (nil
// means always); visit returns false to stop the walk, and Walk then returns
// false. Sorting costs O(k log k) per node with k children: this is for
// lookups and snapshots, never for Update.
func (n *Node[T]) Walk(enter func(*Node[T]) bool, visit func(*Node[T]) bool) bool {
	if !visit(n) {
		return false
	}
	if n.kids == nil {
		return true
	}
	for _, c := range n.SortedKids(nil) {
		if enter != nil && !enter(c) {
			continue
		}
		if !c.Walk(enter, visit) {
			return false
		}
	}
	return true
}
