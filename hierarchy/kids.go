package hierarchy

import (
	"slices"
	"strings"
)

// kidSet holds a node's children. A few children sit in a dense slice kept
// in name order; past smallKids they move to an open-addressing table of
// pointers (linear probing, backward-shift deletion), which costs about 12
// bytes per child instead of the 30-40 of a Go map: nodes with a million
// children (/locks/<name>) are the common case the memory budget is set for.
// Table probes compare the hash kept in each child before its name, and
// growing or deleting rehashes nothing, so a probe reads one child's name
// at most. A dense list is searched by name alone (hashing the name would
// cost more than comparing a few lengths).
//
// Table order is not deterministic (the hash seed is random per process so
// that clients cannot choose colliding names), so callers that must be
// deterministic either sort (SortedKids, Walk) or only use the children as a
// set.
type kidSet[T any] struct {
	n     int
	table bool       // slots is a hash table (else slots[:n] is dense, sorted by name)
	slots []*Node[T] // dense list or table of size 2^k
	// waiting lists the children with waiters at or below them, so hand-off
	// finds queued requests without scanning every child.
	waiting []*Node[T]
	// below and qbelow count the holds and waiters strictly inside the
	// owner's subtree, by wire.Mode (see Node.kids).
	below, qbelow [2]uint32
	// inline holds the first children of a dense list, so the common
	// interior node (one or two children: /ns/<name>/lock) costs no
	// separate slots array. It fits the size class kidSet already used.
	inline [2]*Node[T]
}

func newKidSet[T any]() *kidSet[T] {
	k := &kidSet[T]{}
	k.slots = k.inline[:0]
	return k
}

const smallKids = 8

// find returns the child called name, or nil. A dense list is searched by
// name alone: comparing a few lengths costs less than hashing the name.
func (k *kidSet[T]) find(name string) *Node[T] {
	if !k.table {
		return k.findDense(name)
	}
	return k.findTable(name, hashName(name))
}

func (k *kidSet[T]) findDense(name string) *Node[T] {
	for _, c := range k.slots[:k.n] {
		if c.Name() == name {
			return c
		}
	}
	return nil
}

// findTable is find in a table, given name's hashName h.
func (k *kidSet[T]) findTable(name string, h uint32) *Node[T] {
	mask := len(k.slots) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		c := k.slots[i]
		if c == nil || (c.hash == h && c.Name() == name) {
			return c
		}
	}
}

func (k *kidSet[T]) add(c *Node[T]) {
	if !k.table && k.n < smallKids {
		// In name order; a plain shift, as most lists are empty or short.
		name := c.Name()
		i := k.n
		for i > 0 && k.slots[i-1].Name() > name {
			i--
		}
		k.slots = append(k.slots[:k.n], nil)
		copy(k.slots[i+1:], k.slots[i:k.n])
		k.slots[i] = c
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
	i := int(c.hash) & mask
	for k.slots[i] != nil {
		i = (i + 1) & mask
	}
	k.slots[i] = c
}

func (k *kidSet[T]) rehash(size int) {
	old := k.slots
	if !k.table {
		old = old[:k.n]
	}
	k.slots = make([]*Node[T], size)
	k.table = true
	for _, c := range old {
		if c != nil {
			k.insert(c)
		}
	}
}

// unsorted appends the children to buf in storage order.
func (k *kidSet[T]) unsorted(buf []*Node[T]) []*Node[T] {
	if !k.table {
		return append(buf, k.slots[:k.n]...)
	}
	for _, c := range k.slots {
		if c != nil {
			buf = append(buf, c)
		}
	}
	return buf
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
		k.slots = sortByName(k.unsorted(nil)) // back to a dense list
		k.table = false
	} else if len(k.slots) > 16 && k.n*8 < len(k.slots) {
		k.rehash(len(k.slots) / 4)
	}
}

// deleteFromTable removes c and shifts later members of its probe run back,
// so that lookups never stop early at a hole.
func (k *kidSet[T]) deleteFromTable(c *Node[T]) {
	mask := len(k.slots) - 1
	i := int(c.hash) & mask
	for k.slots[i] != c {
		i = (i + 1) & mask
	}
	k.slots[i] = nil
	for j := (i + 1) & mask; k.slots[j] != nil; j = (j + 1) & mask {
		// Move slots[j] into the hole at i unless its home lies cyclically
		// in (i, j], where it would still be found.
		if home := int(k.slots[j].hash) & mask; (j-home)&mask >= (j-i)&mask {
			k.slots[i], k.slots[j] = k.slots[j], nil
			i = j
		}
	}
}

func sortByName[T any](v []*Node[T]) []*Node[T] {
	slices.SortFunc(v, func(a, b *Node[T]) int { return strings.Compare(a.Name(), b.Name()) })
	return v
}

// SortedKids appends n's children to buf in name order: the order of paths.
// A few children are kept in order; only a large set is sorted here.
func (n *Node[T]) SortedKids(buf []*Node[T]) []*Node[T] {
	if n.kids == nil {
		return buf
	}
	start := len(buf)
	buf = n.kids.unsorted(buf)
	if n.kids.table {
		sortByName(buf[start:])
	}
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
