package client

import "sync"

// seqTracker hands out the per-client sequence numbers of mutating requests
// and computes AckSeq, the floor of the server's dedup window: every Seq
// below it is finished (answered, or abandoned and never to be retried).
type seqTracker struct {
	mu   sync.Mutex
	next uint64              // next Seq to hand out
	low  uint64              // smallest unfinished Seq, or next when none
	open map[uint64]struct{} // unfinished Seqs
}

func newSeqTracker() *seqTracker {
	return &seqTracker{next: 1, low: 1, open: make(map[uint64]struct{})}
}

// begin reserves a new Seq. Call end(seq) once it will never be sent again.
func (t *seqTracker) begin() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.next
	t.next++
	t.open[s] = struct{}{}
	return s
}

// end marks seq finished and advances the floor past finished Seqs.
func (t *seqTracker) end(seq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.open, seq)
	for t.low < t.next {
		if _, busy := t.open[t.low]; busy {
			break
		}
		t.low++
	}
}

// ack returns the current AckSeq.
func (t *seqTracker) ack() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.low
}
