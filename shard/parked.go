package shard

import (
	"sync"
	"time"

	"github.com/wardenlock/warden/wire"
)

// A blocking acquire (or campaign) is parked here from before it is proposed
// until it is answered: granted directly, granted later by a hand-off that any
// entry may apply, timed out, or cancelled. Registration happens before the
// proposal because a hand-off can be applied before the proposer has even
// seen the "queued" result of the request it grants. The first answer wins.

type clientSeq struct{ client, seq uint64 }

type parkedReq struct {
	s     *Shard
	key   clientSeq
	path  string
	id    uint64
	wait  int64
	to    wire.Answerer
	timer *time.Timer
	// ranOut: its wait timer fired. Its withdrawal is then answered
	// Timeout, whichever of the dequeue event and the cancel's own result
	// reaches it first (the event, applied inside the entry, usually does).
	ranOut bool
}

// Answer takes the proposal's own result: "queued" starts the wait (a
// hand-off or the wait's end answers it later); anything else answers
// whichever copy of the request is parked under its key now.
func (p *parkedReq) Answer(resp *wire.Response) {
	if resp.Code == wire.Queued {
		p.s.parked.queued(p.key, func() {
			if p.s.parked.ranOut(p.key) {
				p.s.cancelWait(p.key, p.path)
			}
		})
		return
	}
	p.s.parked.deliver(p.key, resp)
}

type parkedSet struct {
	mu sync.Mutex
	m  map[clientSeq]*parkedReq
}

func newParkedSet() *parkedSet { return &parkedSet{m: make(map[clientSeq]*parkedReq)} }

func (ps *parkedSet) add(k clientSeq, p *parkedReq) {
	ps.mu.Lock()
	if old := ps.m[k]; old != nil {
		// A newer copy of the same request (same client and seq)
		// replaces the older one, which is answered Superseded: it is
		// either the client's own earlier attempt, gone with its
		// connection, or a stale copy a router still retried after its
		// client left, in which case the client sends its copy again.
		if old.timer != nil {
			old.timer.Stop()
		}
		defer old.to.Answer(&wire.Response{ID: old.id, Code: wire.Superseded, Msg: "superseded by a newer copy of the same request"})
	}
	ps.m[k] = p
	ps.mu.Unlock()
}

// deliver answers and forgets the parked request; it reports whether one was
// there. resp.ID is set to the parked request's id.
func (ps *parkedSet) deliver(k clientSeq, resp *wire.Response) bool {
	ps.mu.Lock()
	p := ps.m[k]
	if p != nil {
		delete(ps.m, k)
		if p.timer != nil {
			p.timer.Stop()
		}
	}
	ps.mu.Unlock()
	if p == nil {
		return false
	}
	if p.ranOut && resp.Code == wire.Cancelled {
		resp.Code, resp.Msg = wire.Timeout, "the wait ran out; nothing is held"
	}
	resp.ID = p.id
	p.to.Answer(resp)
	return true
}

// ranOut marks the parked copy under k as timed out; false if none is
// parked there any more.
func (ps *parkedSet) ranOut(k clientSeq) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p := ps.m[k]
	if p != nil {
		p.ranOut = true
	}
	return p != nil
}

// queued arms the wait timer once the state machine has queued the request.
func (ps *parkedSet) queued(k clientSeq, onTimeout func()) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p := ps.m[k]
	if p == nil || p.timer != nil || p.wait <= 0 {
		return
	}
	p.timer = time.AfterFunc(time.Duration(p.wait)*time.Millisecond, onTimeout)
}

func (ps *parkedSet) has(k clientSeq) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.m[k] != nil
}

// drain answers every parked request with code (shutdown).
func (ps *parkedSet) drain(code wire.Code, msg string) {
	ps.mu.Lock()
	all := ps.m
	ps.m = make(map[clientSeq]*parkedReq)
	ps.mu.Unlock()
	for _, p := range all {
		if p.timer != nil {
			p.timer.Stop()
		}
		p.to.Answer(&wire.Response{ID: p.id, Code: code, Msg: msg})
	}
}
