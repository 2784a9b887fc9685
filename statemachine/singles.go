package statemachine

import "math/bits"

// singleTable finds the holders of single-lock leases by token (a single
// lease's id is SingleLeaseBit|token). It is an open-addressing table of
// holder pointers (linear probing, backward-shift deletion): 8 bytes a slot
// where a Go map of id to lease would cost several times that, and the
// lease itself lives in its holder. Iteration order is the table's, which
// is not replicated: callers sort or treat it as a set.
type singleTable struct {
	n     int
	slots []*holder // len is 0 or a power of two
}

func (t *singleTable) home(token uint64) int {
	// Fibonacci hashing: tokens are sequential, the multiply spreads them.
	return int(bits.RotateLeft64(token*0x9e3779b97f4a7c15, 32)) & (len(t.slots) - 1)
}

// get returns the holder with this token, or nil.
func (t *singleTable) get(token uint64) *holder {
	if t.n == 0 {
		return nil
	}
	mask := len(t.slots) - 1
	for i := t.home(token); ; i = (i + 1) & mask {
		h := t.slots[i]
		if h == nil || h.token == token {
			return h
		}
	}
}

func (t *singleTable) put(h *holder) {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.resize(max(16, len(t.slots)*2))
	}
	t.insert(h)
	t.n++
}

func (t *singleTable) insert(h *holder) {
	mask := len(t.slots) - 1
	i := t.home(h.token)
	for t.slots[i] != nil {
		i = (i + 1) & mask
	}
	t.slots[i] = h
}

func (t *singleTable) resize(size int) {
	old := t.slots
	t.slots = make([]*holder, size)
	for _, h := range old {
		if h != nil {
			t.insert(h)
		}
	}
}

// remove takes h out; it must be in the table.
func (t *singleTable) remove(h *holder) {
	mask := len(t.slots) - 1
	i := t.home(h.token)
	for t.slots[i] != h {
		i = (i + 1) & mask
	}
	t.slots[i] = nil
	for j := (i + 1) & mask; t.slots[j] != nil; j = (j + 1) & mask {
		// Move slots[j] into the hole unless its home lies cyclically in
		// (i, j], where it is still found.
		if home := t.home(t.slots[j].token); (j-home)&mask >= (j-i)&mask {
			t.slots[i], t.slots[j] = t.slots[j], nil
			i = j
		}
	}
	t.n--
	if len(t.slots) > 16 && t.n*8 < len(t.slots) {
		t.resize(len(t.slots) / 4)
	}
}

// each calls fn for every holder, in table order.
func (t *singleTable) each(fn func(*holder)) {
	for _, h := range t.slots {
		if h != nil {
			fn(h)
		}
	}
}
