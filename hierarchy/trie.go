package hierarchy

import (
	"hash/maphash"
	"strings"
	"unsafe"
)

// Node is one path segment. Its counters are kept by the Trie's Add* methods
// and describe locks held and requests queued at this node and strictly below
// it. Val is the caller's payload; the trie never reads it.
type Node[T any] struct {
	parent *Node[T]
	// name and nameLen are the segment (see Name): a string header cut in
	// two so that the name's hash fits beside it and the node stays 48
	// bytes plus the payload. The parent's child table compares and
	// rehashes by hash, so it never reads a name it does not want.
	name    *byte
	nameLen uint32
	hash    uint32
	// kids is nil for a leaf (most nodes are leaves). The subtree counters
	// (holds and waiters strictly below) live in it: only a node with
	// children has anything below it.
	kids   *kidSet[T]
	held   [2]uint32 // holds at this node, by wire.Mode
	queued [2]uint32 // waiters at this node
	Val    T
}

// Trie is a tree of path segments rooted at "/".
type Trie[T any] struct {
	root  Node[T]
	nodes int
	// A path that comes and goes (a lock taken and released) builds and
	// prunes the same nodes every cycle, so pruned nodes and emptied child
	// sets are kept for reuse. They wait in pruned/prunedKids until the
	// caller says no pointer to them is left (Recycle), and only then move
	// to spare/spareKids, where child takes them: a caller that still holds
	// a node it just pruned never sees it come back as another path.
	pruned, spare         []*Node[T]
	prunedKids, spareKids []*kidSet[T]
	// names remembers recently made segment names, one per slot picked by
	// hash, so that a name used over and over (the "lock" of every
	// /ns/<name>/lock) is shared instead of copied for each new node.
	names [256]string
}

// maxSpare bounds the nodes (and, separately, child sets) kept for reuse:
// enough for the paths a busy entry creates, little memory after a mass
// release (a million locks of one lease ending keeps maxSpare, not a million).
const maxSpare = 4096

// New returns an empty trie.
func New[T any]() *Trie[T] { return &Trie[T]{} }

// Root returns the node of "/".
func (t *Trie[T]) Root() *Node[T] { return &t.root }

// Len returns the number of nodes, the root excluded.
func (t *Trie[T]) Len() int { return t.nodes }

// Find returns the node of the valid path p, or nil if it does not exist.
func (t *Trie[T]) Find(p string) *Node[T] {
	n := &t.root
	for seg, rest := firstSegment(p); seg != ""; seg, rest = firstSegment(rest) {
		if n.kids == nil {
			return nil
		}
		if n = n.kids.find(seg); n == nil {
			return nil
		}
	}
	return n
}

// Ensure returns the node of the valid path p, creating it and any missing
// ancestors.
func (t *Trie[T]) Ensure(p string) *Node[T] {
	n := &t.root
	for seg, rest := firstSegment(p); seg != ""; seg, rest = firstSegment(rest) {
		n = t.child(n, seg)
	}
	return n
}

// EnsureChild returns n's child called name, creating it if needed.
func (t *Trie[T]) EnsureChild(n *Node[T], name string) *Node[T] { return t.child(n, name) }

func (t *Trie[T]) child(n *Node[T], seg string) *Node[T] {
	var h uint32 // hashName(seg), computed once and only when needed
	switch {
	case n.kids == nil:
		n.kids = t.newKidSet()
		h = hashName(seg)
	case !n.kids.table:
		if c := n.kids.findDense(seg); c != nil {
			return c
		}
		h = hashName(seg)
	default:
		h = hashName(seg)
		if c := n.kids.findTable(seg, h); c != nil {
			return c
		}
	}
	if uint64(len(seg)) > 1<<32-1 {
		panic("hierarchy: path segment too long")
	}
	name := t.intern(seg, h)
	c := t.newNode()
	*c = Node[T]{parent: n, name: unsafe.StringData(name), nameLen: uint32(len(name)), hash: h}
	n.kids.add(c)
	t.nodes++
	return c
}

// intern returns a copy of seg that a node may keep: seg points into a
// request's path, which must not stay alive for as long as the node does.
// A name made recently is shared (strings never change) rather than copied.
func (t *Trie[T]) intern(seg string, h uint32) string {
	slot := &t.names[h%uint32(len(t.names))]
	if *slot != seg {
		*slot = strings.Clone(seg)
	}
	return *slot
}

var kidSeed = maphash.MakeSeed()

// hashName hashes a segment for the child tables. The seed is random per
// process, so clients cannot choose colliding names; nothing replicated
// depends on it.
func hashName(seg string) uint32 { return uint32(maphash.String(kidSeed, seg)) }

// Prune removes n and then its ancestors for as long as they are idle: no
// counters, no children, and inUse reports false for them. Pruning the root
// or an already detached node does nothing.
func (t *Trie[T]) Prune(n *Node[T], inUse func(*Node[T]) bool) {
	for n != nil && n.parent != nil && n.idle() && !inUse(n) {
		p := n.parent
		p.kids.remove(n)
		if p.kids.n == 0 {
			if len(t.prunedKids)+len(t.spareKids) < maxSpare {
				t.prunedKids = append(t.prunedKids, p.kids)
			}
			p.kids = nil
		}
		n.parent = nil
		t.nodes--
		if len(t.pruned)+len(t.spare) < maxSpare {
			t.pruned = append(t.pruned, n)
		}
		n = p
	}
}

// Recycle makes the nodes and child sets pruned so far reusable by later
// Ensure calls. Call it only where nothing outside the trie still points at
// a pruned node (the state machine: between entries). Until then a pruned
// node stays as Prune left it: detached, its payload untouched.
func (t *Trie[T]) Recycle() {
	if len(t.pruned) > 0 {
		t.spare = append(t.spare, t.pruned...)
		clear(t.pruned)
		t.pruned = t.pruned[:0]
	}
	if len(t.prunedKids) > 0 {
		t.spareKids = append(t.spareKids, t.prunedKids...)
		clear(t.prunedKids)
		t.prunedKids = t.prunedKids[:0]
	}
}

// newNode returns a recycled node or a new one; the caller sets every field.
func (t *Trie[T]) newNode() *Node[T] {
	if i := len(t.spare) - 1; i >= 0 {
		c := t.spare[i]
		t.spare[i] = nil
		t.spare = t.spare[:i]
		return c
	}
	return new(Node[T])
}

// newKidSet returns an empty child set, recycled if one is spare.
func (t *Trie[T]) newKidSet() *kidSet[T] {
	i := len(t.spareKids) - 1
	if i < 0 {
		return newKidSet[T]()
	}
	k := t.spareKids[i]
	t.spareKids[i] = nil
	t.spareKids = t.spareKids[:i]
	*k = kidSet[T]{}
	k.slots = k.inline[:0]
	return k
}

func (n *Node[T]) idle() bool {
	return n.kids == nil && n.held == [2]uint32{} && n.queued == [2]uint32{}
}

// Detached reports whether n has been pruned from its trie.
func (n *Node[T]) Detached() bool { return n.parent == nil && n.nameLen != 0 }

// Parent returns n's parent, nil for the root.
func (n *Node[T]) Parent() *Node[T] { return n.parent }

// Name returns n's segment ("" for the root).
func (n *Node[T]) Name() string { return unsafe.String(n.name, n.nameLen) }

// IsRoot reports whether n is the root.
func (n *Node[T]) IsRoot() bool { return n.parent == nil }

// Depth returns the number of segments of n's path.
func (n *Node[T]) Depth() int {
	d := 0
	for p := n.parent; p != nil; p = p.parent {
		d++
	}
	return d
}

// Path rebuilds n's path. It allocates; hot paths keep the request's path.
func (n *Node[T]) Path() string {
	if n.parent == nil {
		return "/"
	}
	size := 0
	for p := n; p.parent != nil; p = p.parent {
		size += 1 + int(p.nameLen)
	}
	b := make([]byte, size)
	i := size
	for p := n; p.parent != nil; p = p.parent {
		i -= int(p.nameLen)
		copy(b[i:], p.Name())
		i--
		b[i] = '/'
	}
	return string(b)
}

// Child returns n's child called name, or nil.
func (n *Node[T]) Child(name string) *Node[T] {
	if n.kids == nil {
		return nil
	}
	return n.kids.find(name)
}

// NumKids returns the number of n's children.
func (n *Node[T]) NumKids() int {
	if n.kids == nil {
		return 0
	}
	return n.kids.n
}

// Related reports whether a and b lie on one root-to-leaf line: one is an
// ancestor of the other, or they are the same node.
func Related[T any](a, b *Node[T]) bool {
	da, db := a.Depth(), b.Depth()
	for ; da > db; da-- {
		a = a.parent
	}
	for ; db > da; db-- {
		b = b.parent
	}
	return a == b
}

// firstSegment splits "/a/b/c" into "a" and "/b/c"; "" and "/" give "".
// Segments are a few bytes, where a plain loop beats IndexByte's call.
func firstSegment(p string) (seg, rest string) {
	if len(p) <= 1 {
		return "", ""
	}
	p = p[1:]
	i := 0
	for i < len(p) && p[i] != '/' {
		i++
	}
	return p[:i], p[i:]
}
