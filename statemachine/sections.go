package statemachine

import "fmt"

// Snapshot sections. State added after format version 4 (semaphores,
// lock-delay, range moves, lease checkpoints, ...) is saved as a tagged
// section written after the lock trie, so features land without each one
// rewriting the core encoding. Every registered section is written on every
// save, in tag order; a reader refuses a tag it does not know, since
// dropping replicated state silently would let replicas diverge.
//
// A section's save and load run with the whole core state already written
// or rebuilt, so a section may refer to leases and lock paths.
type snapSection struct {
	tag  uint64
	name string
	save func(s *StateMachine, w *snapWriter)
	load func(c *recovery)
}

// snapSections is ordered by tag. Tags are part of the snapshot format:
// never reuse one.
var snapSections []snapSection

// registerSection adds a section; called from package init functions.
func registerSection(sec snapSection) {
	for i, have := range snapSections {
		if have.tag == sec.tag {
			panic(fmt.Sprintf("statemachine: snapshot section tag %d used by %s and %s", sec.tag, have.name, sec.name))
		}
		if have.tag > sec.tag {
			snapSections = append(snapSections[:i], append([]snapSection{sec}, snapSections[i:]...)...)
			return
		}
	}
	snapSections = append(snapSections, sec)
}

func (s *StateMachine) writeSections(w *snapWriter) {
	w.uvarint(uint64(len(snapSections)))
	for _, sec := range snapSections {
		w.uvarint(sec.tag)
		sec.save(s, w)
	}
}

func (c *recovery) readSections() {
	r := c.r
	n := r.count(1 << 10)
	for i := 0; i < n && r.err == nil; i++ {
		tag := r.uvarint()
		if r.err != nil {
			return
		}
		found := false
		for _, sec := range snapSections {
			if sec.tag == tag {
				sec.load(c)
				found = true
				break
			}
		}
		if !found {
			r.fail(fmt.Errorf("unknown snapshot section %d (written by a newer version?)", tag))
		}
	}
}
