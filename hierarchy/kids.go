package hierarchy

import (
	"hash/maphash"
	"slices"
	"strings"
)

// kidSet holds a node's children. A few children sit in a dense slice that is
// scanned; past smallKids they move to an open-addressing table of pointers
// (linear probing, backward-shift deletion), which costs about 12 bytes per
// child instead of the 30-40 of a Go map: nodes with a million children
// (/locks/<name>) are the common case the memory budget is set for.
//
// Iteration order is not deterministic (the hash seed is random per process
// so that clients cannot choose colliding names), so callers that must be
// deterministic either sort (SortedKids) or only use the children as a set.
type kidSet[T any] struct {
	n     int
	table bool       // slots is a hash table (else slots[:n] is dense)
	slots []*Node[T] // dense list or table of size 2^k
	// waiting lists the children with waiters at or below them, so hand-off
	// finds queued requests without scanning every child.
	waiting []*Node[T]
}

const smallKids = 8

var kidSeed = maphash.MakeSeed()

func (k *kidSet[T]) find(name string) *Node[T] {
	if !k.table {
		for _, c := range k.slots[:k.n] {
			if c.name == name {
				return c
			}
		}
		return nil
	}
	mask := len(k.slots) - 1
	for i := int(maphash.String(kidSeed, name)) & mask; ; i = (i + 1) & mask {
		c := k.slots[i]
		if c == nil || c.name == name {
			return c
		}
	}
}

func (k *kidSet[T]) add(c *Node[T]) {
	if !k.table && k.n < smallKids {
		k.slots = append(k.slots[:k.n], c)
		k.n++
		return
	}
	if !k.table || (k.n+1)*4 > len(k.slots)*3 {
		k.rehash(max(16, len(k.slots)*2))
	}
	k.insert(c)
	k.n++
}

func (k *kidSet[T]) insert(c *Node[T]) {
	mask := len(k.slots) - 1
	i := int(maphash.String(kidSeed, c.name)) & mask
	for k.slots[i] != nil {
		i = (i + 1) & mask
	}
	k.slots[i] = c
}

func (k *kidSet[T]) rehash(size int) {
	old := k.all()
	k.slots = make([]*Node[T], size)
	k.table = true
	for _, c := range old {
		k.insert(c)
	}
}

// all returns the children in storage order (a fresh slice).
func (k *kidSet[T]) all() []*Node[T] {
	if !k.table {
		return slices.Clone(k.slots[:k.n])
	}
	out := make([]*Node[T], 0, k.n)
	for _, c := range k.slots {
		if c != nil {
			out = append(out, c)
		}
	}
	return out
}

func (k *kidSet[T]) remove(c *Node[T]) {
	if !k.table {
		i := slices.Index(k.slots[:k.n], c)
		k.slots = slices.Delete(k.slots[:k.n], i, i+1)
		k.n--
		return
	}
	k.deleteFromTable(c)
	k.n--
	if k.n <= smallKids/2 {
		k.slots = k.all() // back to a dense list
		k.table = false
	} else if len(k.slots) > 16 && k.n*8 < len(k.slots) {
		k.rehash(len(k.slots) / 4)
	}
}

// deleteFromTable removes c and shifts later members of its probe run back,
// so that lookups never stop early at a hole.
func (k *kidSet[T]) deleteFromTable(c *Node[T]) {
	mask := len(k.slots) - 1
	i := int(maphash.String(kidSeed, c.name)) & mask
	for k.slots[i] != c {
		i = (i + 1) & mask
	}
	k.slots[i] = nil
	for j := (i + 1) & mask; k.slots[j] != nil; j = (j + 1) & mask {
		home := int(maphash.String(kidSeed, k.slots[j].name)) & mask
		// Move slots[j] into the hole at i unless its home lies cyclically
		// in (i, j], where it would still be found.
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			k.slots[i], k.slots[j] = k.slots[j], nil
			i = j
		}
	}
}

// SortedKids appends n's children to buf in name order: the order of paths.
func (n *Node[T]) SortedKids(buf []*Node[T]) []*Node[T] {
	if n.kids == nil {
		return buf
	}
	start := len(buf)
	if n.kids.table {
		for _, c := range n.kids.slots {
			if c != nil {
				buf = append(buf, c)
			}
		}
	} else {
		buf = append(buf, n.kids.slots[:n.kids.n]...)
	}
	slices.SortFunc(buf[start:], func(a, b *Node[T]) int { return strings.Compare(a.name, b.name) })
	return buf
}

// WaitingKids returns the children with waiters at or below them, in no
// particular order. The slice belongs to the trie: do not keep or modify it.
func (n *Node[T]) WaitingKids() []*Node[T] {
	if n.kids == nil {
		return nil
	}
	return n.kids.waiting
}

func (k *kidSet[T]) markWaiting(c *Node[T], on bool) {
	if on {
		k.waiting = append(k.waiting, c)
		return
	}
	i := slices.Index(k.waiting, c)
	last := len(k.waiting) - 1
	k.waiting[i] = k.waiting[last]
	k.waiting[last] = nil
	k.waiting = k.waiting[:last]
}
