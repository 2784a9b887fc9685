package statemachine

import (
	"github.com/wardenlock/warden/wire"
)

// KV entries live in trie nodes, so a prefix list is a subtree walk and a
// key bound to a lease is found from the lease in O(1).

func (s *StateMachine) opKVPut(r *wire.Request, out *wire.Response) *wire.Error {
	if err := s.checkPath(r.Path); err != nil {
		return err
	}
	if len(r.Value) > s.cfg.MaxValue {
		return wire.Errorf(wire.TooLarge, "value is %d bytes, over the limit of %d", len(r.Value), s.cfg.MaxValue)
	}
	var l *lease
	if r.Lease != 0 {
		var err *wire.Error
		if l, err = s.useLease(r); err != nil {
			return err
		}
	}
	n := s.trie.Ensure(r.Path)
	defer s.tidy(n)
	var e *kvEntry
	if n.Val.ext != nil {
		e = n.Val.ext.kv
	}
	if err := checkVersion(r, e); err != nil {
		return err
	}
	rev := s.rev + 1 // the revision of the put event below
	if e == nil {
		e = &kvEntry{createRev: rev}
		n.Val.extension().kv = e
		s.nKVs++
	}
	if e.lease != r.Lease {
		if old := s.leases[e.lease]; old != nil {
			old.removeKey(n)
		}
		e.lease = r.Lease
		if l != nil {
			l.addKey(n)
		}
	}
	e.value, e.modRev = r.Value, rev
	e.version++
	s.emit(wire.Event{Kind: wire.EvKVPut, Cause: wire.CauseUser, Path: r.Path, Value: r.Value,
		Version: e.version, Lease: e.lease})
	out.Version, out.Lease = e.version, e.lease
	return nil
}

func (s *StateMachine) opKVDelete(r *wire.Request, out *wire.Response) *wire.Error {
	if err := s.checkPath(r.Path); err != nil {
		return err
	}
	n := s.trie.Find(r.Path)
	e := kvAt(n)
	if e == nil {
		return wire.Errorf(wire.NotFound, "no key %s", r.Path)
	}
	if err := checkVersion(r, e); err != nil {
		return err
	}
	out.Version = e.version
	s.deleteKV(n, r.Path, wire.CauseUser)
	s.tidy(n)
	return nil
}

// checkVersion applies a compare-and-set guard; expected 0 means "absent".
func checkVersion(r *wire.Request, e *kvEntry) *wire.Error {
	if !r.Has(wire.FlagHasExpect) {
		return nil
	}
	var cur uint64
	if e != nil {
		cur = e.version
	}
	if cur != r.Version {
		return wire.Errorf(wire.VersionMismatch, "version is %d, expected %d", cur, r.Version)
	}
	return nil
}

// deleteKV removes the key at n (by a client, or because its lease ended).
// It does not prune n: a lease end still has to run its hand-off, which
// needs every changed node attached to the trie. Callers tidy afterwards.
func (s *StateMachine) deleteKV(n *lockNode, path string, cause wire.Cause) {
	e := n.Val.ext.kv
	if l := s.leases[e.lease]; e.lease != 0 && l != nil {
		l.removeKey(n)
	}
	n.Val.ext.kv = nil
	s.nKVs--
	if path == "" {
		path = n.Path()
	}
	s.emit(wire.Event{Kind: wire.EvKVDelete, Cause: cause, Path: path, Version: e.version, Lease: e.lease})
}

func kvAt(n *lockNode) *kvEntry {
	if n == nil || n.Val.ext == nil {
		return nil
	}
	return n.Val.ext.kv
}
