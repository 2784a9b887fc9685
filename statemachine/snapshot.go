package statemachine

import (
	"bufio"
	"hash/crc64"
	"io"
	"slices"

	sm "github.com/lni/dragonboat/v4/statemachine"
	"github.com/wardenlock/warden/wire"
)

// SaveSnapshot writes all replicated state. Everything is written in an
// order that depends only on the state (sorted ids, sorted paths) or on
// replicated history (lease lists, the client LRU, queues), so two replicas
// with the same state write the same bytes, and a replica recovered from
// them writes them again.
func (s *StateMachine) SaveSnapshot(w io.Writer, _ sm.ISnapshotFileCollection, stop <-chan struct{}) error {
	return s.encodeState(w, stop)
}

// encodeState writes the whole replicated state to w (SaveSnapshot, Image),
// stopping early once stop is closed (nil: never).
func (s *StateMachine) encodeState(w io.Writer, stop <-chan struct{}) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	sw := &snapWriter{w: bw, stop: stop}
	s.writeState(sw)
	if sw.err != nil {
		return sw.err
	}
	return bw.Flush()
}

func (s *StateMachine) writeState(w *snapWriter) {
	w.write([]byte(snapshotMagic))
	w.uvarint(snapshotVersion)
	w.uvarint(s.cfg.ShardID)
	w.varint(s.now)
	for _, v := range []uint64{s.rev, s.fence, s.floor, s.applied, s.rangeGen, s.maxTerm} {
		w.uvarint(v)
	}
	w.uvarint(uint64(len(s.ranges)))
	for _, rg := range s.ranges {
		w.str(rg.Start)
		w.str(rg.End)
		w.uvarint(rg.Shard)
		w.uvarint(rg.Gen)
	}
	s.writeLeases(w)
	s.writeClients(w)
	s.writeNode(w, s.trie.Root(), nil)
	s.writeSections(w)
	w.write([]byte(snapshotMagic))
}

func (s *StateMachine) writeLeases(w *snapWriter) {
	ids := make([]uint64, 0, len(s.leases))
	for id := range s.leases {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	w.uvarint(uint64(len(ids)))
	for _, id := range ids {
		l := s.leases[id]
		w.uvarint(id)
		w.varint(l.ttl)
		w.uvarint(l.rev)
		w.uvarint(uint64(len(l.holders)))
		w.uvarint(uint64(len(l.waiters)))
		w.uvarint(uint64(len(l.keys)))
	}
	live := s.tombList[s.tombHead:]
	w.uvarint(uint64(len(live)))
	for _, t := range live {
		w.uvarint(t.id)
		w.varint(t.at)
	}
}

func (s *StateMachine) writeClients(w *snapWriter) {
	w.uvarint(uint64(len(s.clients)))
	var buf []seqRecord
	for c := s.lru.head; c != nil; c = c.next {
		w.uvarint(c.id)
		w.uvarint(c.floor)
		w.varint(c.lastSeen)
		recs := c.sortedRecords(buf[:0])
		buf = recs
		w.uvarint(uint64(len(recs)))
		for _, e := range recs {
			seq, rec := e.seq, e.rec
			w.uvarint(seq)
			w.uvarint(uint64(rec.op))
			w.uvarint(uint64(rec.code))
			w.uvarint(uint64(rec.mode))
			w.uvarint(uint64(rec.count))
			w.str(rec.msg)
			w.uvarint(rec.token)
			w.uvarint(rec.lease)
			w.uvarint(rec.version)
			w.uvarint(rec.rev)
			w.varint(rec.ttl)
			w.flag(rec.w != nil)
			w.flag(rec.lingering)
		}
	}
}

// writeNode writes n and its subtree in path order.
func (s *StateMachine) writeNode(w *snapWriter, n *lockNode, kids []*lockNode) {
	w.tick()
	w.str(n.Name())
	first := n.Val.first.token != 0
	w.flag(first)
	if first {
		s.writeHolder(w, &n.Val.first)
	}
	e := n.Val.ext
	w.flag(e != nil)
	if e != nil {
		w.uvarint(uint64(len(e.more)))
		for _, h := range e.more {
			s.writeHolder(w, h)
		}
		writeQueue(w, e.head)
		writeKV(w, e.kv)
		w.bytes(e.leader)
	}
	kids = n.SortedKids(kids[:0])
	w.uvarint(uint64(len(kids)))
	for _, c := range kids {
		s.writeNode(w, c, nil)
	}
}

func (s *StateMachine) writeHolder(w *snapWriter, h *holder) {
	w.str(h.owner)
	w.uvarint(h.leaseID())
	w.uvarint(h.token)
	w.uvarint(uint64(h.count))
	w.uvarint(uint64(h.mode))
	w.flag(h.campaign)
	if h.single {
		w.varint(h.singleTTL())
		w.uvarint(h.singleRev())
	} else {
		w.uvarint(uint64(h.leaseIdx))
	}
}

func writeQueue(w *snapWriter, head *waiter) {
	n := 0
	for x := head; x != nil; x = x.next {
		n++
	}
	w.uvarint(uint64(n))
	for x := head; x != nil; x = x.next {
		w.str(x.owner)
		w.uvarint(x.lease)
		w.varint(x.ttl)
		w.uvarint(x.client)
		w.uvarint(x.seq)
		w.uvarint(x.arrival)
		w.bytes(x.value)
		w.uvarint(uint64(x.leaseIdx))
		w.uvarint(uint64(x.mode))
		w.flag(x.campaign)
	}
}

func writeKV(w *snapWriter, e *kvEntry) {
	w.flag(e != nil)
	if e == nil {
		return
	}
	w.bytes(e.value)
	w.uvarint(e.version)
	w.uvarint(e.createRev)
	w.uvarint(e.modRev)
	w.uvarint(e.lease)
	w.uvarint(uint64(e.leaseIdx))
}

// GetHash is a digest of all replicated state: the CRC-64 of the snapshot
// bytes, so equal hashes mean equal snapshots (up to CRC collisions).
func (s *StateMachine) GetHash() (uint64, error) {
	h := crc64.New(crc64.MakeTable(crc64.ECMA))
	if err := s.SaveSnapshot(h, nil, nil); err != nil {
		return 0, err
	}
	return h.Sum64(), nil
}

// modeOf reads a stored mode, refusing values that are not modes.
func modeOf(v uint64, r *snapReader) wire.Mode {
	if v > uint64(wire.Shared) {
		r.fail(errBadMode)
	}
	return wire.Mode(v)
}
