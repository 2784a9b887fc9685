package crashfs

import (
	"fmt"
	"math/rand"
)

// Mode is what a power loss keeps of what was not synced. Whatever the
// mode, everything synced is kept: a file's data and size as of its last
// sync, a directory's entries as of its last sync.
type Mode int

const (
	// Synced keeps nothing that was not synced.
	Synced Mode = iota
	// Kept keeps everything, as a killed process does (the kernel still
	// has it).
	Kept
	// Torn keeps, of each unsynced write, any of its 512-byte sectors
	// (each by a coin toss: the page cache writes back in any order), of
	// each unsynced truncation either outcome, and of each directory's
	// unsynced changes a prefix (metadata is journaled in order). A
	// sector written past the end makes the file that long, zeros where
	// nothing reached the disk.
	Torn
	// Cut keeps each file's unsynced changes in order up to one of them,
	// which is cut short at a random byte (a write in flight), and of each
	// directory's unsynced changes a prefix.
	Cut
)

// Modes are all the modes, for tests that cycle through them.
var Modes = []Mode{Synced, Kept, Torn, Cut}

func (m Mode) String() string {
	switch m {
	case Synced:
		return "synced"
	case Kept:
		return "kept"
	case Torn:
		return "torn"
	case Cut:
		return "cut"
	}
	return fmt.Sprintf("mode(%d)", int(m))
}

const sector = 512

// State is the file system as it was at one moment: what was synced and
// what changed since (a copy; later operations do not touch it).
type State struct {
	root *inode
}

// captureLocked copies what an image needs: synced data and pending
// changes (both never changed in place), and the directories.
func (f *FS) captureLocked() *State {
	seen := map[*inode]*inode{}
	var cp func(n *inode) *inode
	cp = func(n *inode) *inode {
		if c := seen[n]; c != nil {
			return c
		}
		c := &inode{dir: n.dir, synced: n.synced, pending: n.pending[:len(n.pending):len(n.pending)]}
		seen[n] = c
		if n.dir {
			c.entries = make(map[string]*inode, len(n.entries))
			c.durable = make(map[string]*inode, len(n.durable))
			c.dirOps = make([]dirOp, len(n.dirOps))
			for k, v := range n.entries {
				c.entries[k] = cp(v)
			}
			for k, v := range n.durable {
				c.durable[k] = cp(v)
			}
			for i, op := range n.dirOps {
				c.dirOps[i] = op
				if op.node != nil {
					c.dirOps[i].node = cp(op.node)
				}
			}
		}
		return c
	}
	return &State{root: cp(f.root)}
}

// Capture returns the state as of now.
func (f *FS) Capture() *State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.captureLocked()
}

// Image returns a new file system holding what a power loss at the
// state's moment leaves, in mode m (random choices from rng). Everything
// in it is durable.
func (s *State) Image(m Mode, rng *rand.Rand) *FS {
	done := map[*inode]*inode{}
	var resolve func(n *inode) *inode
	resolve = func(n *inode) *inode {
		if r := done[n]; r != nil {
			return r
		}
		if !n.dir {
			data := fileAfter(n, m, rng)
			r := &inode{data: data, synced: append([]byte(nil), data...)}
			done[n] = r
			return r
		}
		r := newDir()
		done[n] = r
		for name, c := range dirAfter(n, m, rng) {
			rc := resolve(c)
			r.entries[name] = rc
			r.durable[name] = rc
		}
		return r
	}
	return &FS{root: resolve(s.root)}
}

// dirAfter is what a directory holds after the power loss.
func dirAfter(d *inode, m Mode, rng *rand.Rand) map[string]*inode {
	keep := 0
	switch m {
	case Kept:
		return d.entries
	case Torn, Cut:
		keep = rng.Intn(len(d.dirOps) + 1)
	}
	out := make(map[string]*inode, len(d.durable))
	for k, v := range d.durable {
		out[k] = v
	}
	for _, op := range d.dirOps[:keep] {
		if op.from != "" {
			delete(out, op.from)
		}
		if op.node == nil {
			delete(out, op.name)
		} else {
			out[op.name] = op.node
		}
	}
	return out
}

// fileAfter is what a file holds after the power loss.
func fileAfter(n *inode, m Mode, rng *rand.Rand) []byte {
	b := append([]byte(nil), n.synced...)
	switch m {
	case Synced:
	case Kept:
		for _, c := range n.pending {
			b = apply(b, c)
		}
	case Torn:
		for _, c := range n.pending {
			if c.trunc {
				if rng.Intn(2) == 0 {
					b = apply(b, c)
				}
				continue
			}
			end := c.off + int64(len(c.data))
			for s := c.off &^ (sector - 1); s < end; s += sector {
				lo, hi := max(s, c.off), min(s+sector, end)
				if rng.Intn(2) == 0 {
					b = apply(b, change{off: lo, data: c.data[lo-c.off : hi-c.off]})
				}
			}
		}
	case Cut:
		k := rng.Intn(len(n.pending) + 1)
		for _, c := range n.pending[:k] {
			b = apply(b, c)
		}
		if k < len(n.pending) {
			if c := n.pending[k]; !c.trunc && len(c.data) > 1 {
				if c.data = c.data[:rng.Intn(len(c.data))]; len(c.data) > 0 {
					b = apply(b, c)
				}
			}
		}
	}
	return b
}

// Unsynced counts what a power loss at the state's moment may lose: the
// unsynced writes and truncations of files, and the unsynced changes of
// directories, reachable from the root.
func (s *State) Unsynced() (fileChanges, dirChanges int) {
	seen := map[*inode]bool{}
	var walk func(n *inode)
	walk = func(n *inode) {
		if seen[n] {
			return
		}
		seen[n] = true
		fileChanges += len(n.pending)
		dirChanges += len(n.dirOps)
		for _, c := range n.entries {
			walk(c)
		}
	}
	walk(s.root)
	return fileChanges, dirChanges
}
