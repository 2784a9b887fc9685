package statemachine

import (
	"fmt"
	"math"
	"slices"
)

// Snapshot sections of the per-lock extras (extras.go). Each is written in
// sorted key order, so equal state writes equal bytes.
func init() {
	registerSection(snapSection{tag: 10, name: "holder extras", save: saveHoldExtras, load: loadHoldExtras})
	registerSection(snapSection{tag: 11, name: "waiter extras", save: saveWaitExtras, load: loadWaitExtras})
	registerSection(snapSection{tag: 12, name: "semaphores", save: saveSems, load: loadSems})
	registerSection(snapSection{tag: 13, name: "lock delays", save: saveDelays, load: loadDelays})
}

func sortedKeys[K interface{ ~uint64 | ~string }, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func saveHoldExtras(s *StateMachine, w *snapWriter) {
	keys := sortedKeys(s.holdX)
	w.uvarint(uint64(len(keys)))
	for _, t := range keys {
		x := s.holdX[t]
		w.uvarint(t)
		w.str(x.h.node.Path())
		w.varint(x.delay)
		w.flag(x.revocable)
		w.varint(x.revokeAt)
	}
}

func loadHoldExtras(c *recovery) {
	r := c.r
	for n := r.count(math.MaxInt32); n > 0 && r.err == nil; n-- {
		token, path := r.uvarint(), r.str()
		x := &holdExtra{delay: r.varint(), revocable: r.flag(), revokeAt: r.varint()}
		if r.err != nil {
			return
		}
		x.h = holderByToken(c.trie.Find(path), token)
		if x.h == nil {
			r.fail(fmt.Errorf("extras of token %d: no such holder of %s", token, path))
			return
		}
		c.holdX[token] = x
	}
}

func saveWaitExtras(s *StateMachine, w *snapWriter) {
	keys := sortedKeys(s.waitX)
	w.uvarint(uint64(len(keys)))
	for _, a := range keys {
		x := s.waitX[a]
		w.uvarint(a)
		w.uvarint(uint64(x.permits))
		w.varint(x.delay)
		w.flag(x.revocable)
		w.varint(x.priority)
	}
}

func loadWaitExtras(c *recovery) {
	r := c.r
	for n := r.count(math.MaxInt32); n > 0 && r.err == nil; n-- {
		a := r.uvarint()
		x := &waitExtra{permits: uint32(r.uvarint()), delay: r.varint(), revocable: r.flag(), priority: r.varint()}
		if r.err == nil {
			c.waitX[a] = x
		}
	}
}

func saveSems(s *StateMachine, w *snapWriter) {
	keys := sortedKeys(s.sems)
	w.uvarint(uint64(len(keys)))
	for _, p := range keys {
		w.str(p)
		w.uvarint(uint64(s.sems[p]))
	}
}

func loadSems(c *recovery) {
	r := c.r
	for n := r.count(math.MaxInt32); n > 0 && r.err == nil; n-- {
		p, v := r.str(), r.uvarint()
		if r.err == nil {
			c.sems[p] = uint32(v)
		}
	}
}

func saveDelays(s *StateMachine, w *snapWriter) {
	keys := sortedKeys(s.delays)
	w.uvarint(uint64(len(keys)))
	for _, p := range keys {
		w.str(p)
		w.varint(s.delays[p])
	}
}

func loadDelays(c *recovery) {
	r := c.r
	for n := r.count(math.MaxInt32); n > 0 && r.err == nil; n-- {
		p, v := r.str(), r.varint()
		if r.err == nil {
			c.delays[p] = v
		}
	}
}
