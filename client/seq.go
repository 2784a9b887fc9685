package client

import (
	"slices"
	"sync"
	"sync/atomic"
)

// seqTracker hands out the per-client sequence numbers of mutating requests
// and computes AckSeq, the floor of the server's dedup window: every Seq
// below it is finished (answered, or abandoned and never to be retried).
type seqTracker struct {
	mu   sync.Mutex
	next uint64   // next Seq to hand out
	open []uint64 // unfinished Seqs, ascending (begin appends the largest)
	// low is the smallest unfinished Seq, or next when none: written under
	// mu, read without it by every request (ack).
	low atomic.Uint64
}

func newSeqTracker() *seqTracker {
	t := &seqTracker{next: 1}
	t.low.Store(1)
	return t
}

// begin reserves a new Seq. Call end(seq) once it will never be sent again.
func (t *seqTracker) begin() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.next
	t.next++
	t.open = append(t.open, s)
	if len(t.open) == 1 {
		t.low.Store(s)
	}
	return s
}

// end marks seq finished and advances the floor past finished Seqs. The
// open Seqs are the requests in flight, so the sorted slice stays short: a
// search and a shift cost less than a map's hashing and the scan for the
// next open Seq it needed.
func (t *seqTracker) end(seq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	i, ok := slices.BinarySearch(t.open, seq)
	if !ok {
		return
	}
	t.open = slices.Delete(t.open, i, i+1)
	if i == 0 {
		if len(t.open) > 0 {
			t.low.Store(t.open[0])
		} else {
			t.low.Store(t.next)
		}
	}
}

// ack returns the current AckSeq.
func (t *seqTracker) ack() uint64 { return t.low.Load() }
