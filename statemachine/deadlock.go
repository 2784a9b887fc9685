package statemachine

import (
	"slices"

	"github.com/wardenlock/warden/wire"
)

var slicesDeleteFunc = slices.DeleteFunc[[]ownerKey, ownerKey]

// Deadlock detection. A session owner (lease, owner) that waits for a path
// waits for the owners of the holds that conflict with it there (on the
// path, its ancestors and its descendants). Before a new waiter queues, the
// shard follows these wait-for edges from the new waiter: if they lead back
// to its own owner, queueing would close a cycle, and the new waiter (the
// youngest in the cycle, since every other edge already existed) is refused
// with Deadlock instead. Only waits inside the shard are seen; a cycle that
// crosses shards is not. The search is bounded (deadlockBudget nodes): past
// it the waiter queues as before.

type ownerKey struct {
	lease uint64
	owner string
}

const deadlockBudget = 4096

func (s *StateMachine) wouldDeadlock(n *lockNode, mode wire.Mode, lease uint64, owner string) bool {
	if s.nWaiters == 0 {
		return false // nobody waits: no edge can lead back
	}
	if !s.mayChain(n, mode, lease, owner) {
		return false
	}
	me := ownerKey{lease, owner}
	var seen map[ownerKey]bool // made only when a chain goes past one edge
	budget := deadlockBudget
	// The owner's own holds are not edges from the new waiter: waiting on
	// oneself is the SelfConflict rule's business (and only refused when
	// nothing else is in the way).
	stack := s.blockers(n, mode, nil, &budget)
	stack = slicesDeleteFunc(stack, func(o ownerKey) bool { return o == me })
	for len(stack) > 0 && budget > 0 {
		o := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if o == me {
			return true
		}
		l := s.leases[o.lease]
		if l == nil || len(l.waiters) == 0 || seen[o] {
			continue // an owner that waits for nothing ends the chain
		}
		if seen == nil {
			seen = map[ownerKey]bool{}
		}
		seen[o] = true
		for _, w := range l.waiters {
			if budget--; budget <= 0 {
				break
			}
			if w.owner == o.owner {
				stack = s.blockers(w.node, w.mode, stack, &budget)
			}
		}
	}
	return false
}

// mayChain is the allocation-free common case: a cycle needs some blocker
// that itself waits. Holders above or at n are checked directly; holds
// below n send the request to the full search.
func (s *StateMachine) mayChain(n *lockNode, mode wire.Mode, lease uint64, owner string) bool {
	if _, _, below := n.HeldConflicts(mode); below > 0 {
		return true
	}
	found := false
	for p := n; p != nil && !found; p = p.Parent() {
		forHolders(p, func(h *holder) {
			if h.single || !conflicts(h.mode, mode) || (h.lw == lease && h.owner == owner) {
				return
			}
			if l := s.leases[h.lw]; l != nil && len(l.waiters) > 0 {
				found = true
			}
		})
	}
	return found
}

// blockers appends the session owners whose holds conflict with mode at n.
func (s *StateMachine) blockers(n *lockNode, mode wire.Mode, dst []ownerKey, budget *int) []ownerKey {
	add := func(h *holder) {
		if !h.single && conflicts(h.mode, mode) {
			dst = append(dst, ownerKey{h.lw, h.owner})
		}
	}
	for p := n; p != nil; p = p.Parent() {
		*budget--
		forHolders(p, add)
	}
	if _, _, below := n.HeldConflicts(mode); below == 0 {
		return dst
	}
	// enter must not depend on the walk's progress (a large child table is
	// filtered before it is sorted), so the budget only stops the visits.
	n.Walk(func(c *lockNode) bool { return c.HeldHere()+c.HeldBelow() > 0 }, func(c *lockNode) bool {
		*budget--
		if c != n {
			forHolders(c, add)
		}
		return *budget > 0
	})
	return dst
}
