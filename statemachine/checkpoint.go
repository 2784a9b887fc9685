package statemachine

import (
	"fmt"
	"slices"

	"github.com/wardenlock/warden/wire"
)

// Lease checkpoints. Lease deadlines live only in the leader's memory; were
// a new leader to give every lease a full TTL, under steady leadership
// churn a lease whose holder had died would be renewed by every election
// and never expire. The leader's lessor therefore records, now and then,
// how much time a lease that nobody keeps alive has left
// (OpCheckpoint); a new leader starts such a lease at that remaining time
// (plus a bounded allowance for the election), not at a full TTL.
//
// Safety: a checkpoint must never let a lease end sooner than TTL after the
// last keepalive the service acknowledged. The lessor only records a
// remaining time that is at least what its acknowledged keepalives require,
// and before it acknowledges a keepalive for a lease that has a checkpoint
// it clears the checkpoint through the log (Remaining < 0). A checkpoint
// decided under an older Raft term is refused, as an Expire is: a deposed
// leader's late checkpoint cannot undo the current leader's clear.
//
// The record is replicated state: it is in snapshots (section 35) and is
// dropped when its lease ends or is renewed through the log.

// checkpointSectionTag is this section's snapshot tag (faults range 35–39).
const checkpointSectionTag = 35

func init() {
	registerSection(snapSection{tag: checkpointSectionTag, name: "lease checkpoints",
		save: saveCheckpoints, load: loadCheckpoints})
}

// opCheckpoint records (or clears) the remaining time of each listed lease.
// Ids of leases that have ended are skipped: the lessor may be behind.
func (s *StateMachine) opCheckpoint(r *wire.Request, out *wire.Response) *wire.Error {
	if len(r.Leases) != len(r.Remaining) {
		return wire.Errorf(wire.InvalidArgument, "checkpoint has %d leases but %d remaining times",
			len(r.Leases), len(r.Remaining))
	}
	if r.Term != 0 && r.Term < s.maxTerm {
		return wire.Errorf(wire.Conflict, "checkpoint was decided in term %d, superseded by term %d",
			r.Term, s.maxTerm)
	}
	n := 0
	for i, id := range r.Leases {
		if !s.leaseLive(id) {
			continue
		}
		n++
		if rem := r.Remaining[i]; rem < 0 {
			delete(s.checkpoints, id)
		} else {
			s.checkpoints[id] = rem
		}
	}
	out.Count = uint32(n)
	return nil
}

func (s *StateMachine) leaseLive(id uint64) bool {
	return s.leases[id] != nil || s.single(id) != nil
}

// dropCheckpoint forgets a lease's checkpoint when the lease ends or is
// renewed through the log (a renewal is a full TTL from its entry).
func (s *StateMachine) dropCheckpoint(id uint64) {
	if len(s.checkpoints) > 0 {
		delete(s.checkpoints, id)
	}
}

// checkpointOf returns a lease's recorded remaining time, or -1.
func (s *StateMachine) checkpointOf(id uint64) int64 {
	if rem, ok := s.checkpoints[id]; ok {
		return rem
	}
	return -1
}

func saveCheckpoints(s *StateMachine, w *snapWriter) {
	ids := make([]uint64, 0, len(s.checkpoints))
	for id := range s.checkpoints {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	w.uvarint(uint64(len(ids)))
	for _, id := range ids {
		w.uvarint(id)
		w.varint(s.checkpoints[id])
	}
}

func loadCheckpoints(c *recovery) {
	r := c.r
	n := r.count(1 << 30)
	for i := 0; i < n && r.err == nil; i++ {
		id, rem := r.uvarint(), r.varint()
		if r.err != nil {
			return
		}
		if !c.leaseLive(id) {
			r.fail(fmt.Errorf("checkpoint of lease %x, which is not live", id))
			return
		}
		c.checkpoints[id] = rem
	}
}
