package client

import (
	"container/heap"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/wardenlock/warden/wire"
)

// One scheduler per client keeps every session of the client alive: a heap
// of due times (the next keepalive or the local deadline, whichever comes
// first) served by one goroutine with one timer. Keepalives that fall due
// within a short window travel as one request naming every lease
// (Request.Leases), so a process with 100k sessions runs one goroutine and
// sends a few frames per round, instead of a goroutine and two timers per
// session. Each session keeps its own schedule, failures and deadline.

const (
	keepAliveWindow   = 2 * time.Millisecond
	maxLeasesPerFrame = 4096
)

// keepAliveState is a session's part of the schedule, guarded by the
// scheduler's mutex.
type keepAliveState struct {
	idx      int       // position in the heap; -1 when not queued
	sendAt   time.Time // next keepalive
	deadline time.Time // local deadline: last acknowledged send + TTL
	inflight bool      // one keepalive in flight at a time
	failures int
	ended    bool          // Lost or stopped: no more keepalives
	settled  chan struct{} // made by stop while a keepalive is in flight
}

func (k *keepAliveState) due() time.Time {
	if k.deadline.Before(k.sendAt) {
		return k.deadline
	}
	return k.sendAt
}

type dueHeap []*Session

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].ka.due().Before(h[j].ka.due()) }
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].ka.idx, h[j].ka.idx = i, j
}
func (h *dueHeap) Push(x any) {
	s := x.(*Session)
	s.ka.idx = len(*h)
	*h = append(*h, s)
}
func (h *dueHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	s.ka.idx = -1
	return s
}

type keepAliveScheduler struct {
	c     *Client
	clock clock
	wake  chan struct{} // capacity 1: a session became due before the timer
	mu    sync.Mutex
	due   dueHeap
	armed time.Time // when the loop wakes next (zero: not armed)
}

// keepAliveEnd is a session to end once the scheduler's lock is released.
type keepAliveEnd struct {
	s     *Session
	cause error
}

func newKeepAliveScheduler(c *Client) *keepAliveScheduler {
	return &keepAliveScheduler{c: c, clock: c.cfg.clock, wake: make(chan struct{}, 1)}
}

// add schedules a session whose lease was acknowledged at sent.
func (k *keepAliveScheduler) add(s *Session, sent time.Time) {
	k.mu.Lock()
	s.ka = keepAliveState{idx: -1, sendAt: sent.Add(s.ttl / 3), deadline: sent.Add(s.ttl)}
	heap.Push(&k.due, s)
	k.wakeLocked(s.ka.due())
	k.mu.Unlock()
}

// wakeLocked wakes the loop if t comes before the time it sleeps until.
func (k *keepAliveScheduler) wakeLocked(t time.Time) {
	if k.armed.IsZero() || t.Before(k.armed) {
		k.armed = t
		select {
		case k.wake <- struct{}{}:
		default:
		}
	}
}

func (k *keepAliveScheduler) run() {
	for {
		next := k.serve()
		var t timer
		var fire <-chan time.Time
		if !next.IsZero() {
			t = k.clock.NewTimer(next.Sub(k.clock.Now()))
			fire = t.C()
		}
		select {
		case <-fire:
		case <-k.wake:
		case <-k.c.ctx.Done():
		}
		if t != nil {
			t.Stop()
		}
		if k.c.ctx.Err() != nil {
			return
		}
	}
}

// serve handles every session due now (keepalives: within the batching
// window), sends their keepalives and returns when it must run again.
func (k *keepAliveScheduler) serve() time.Time {
	now := k.clock.Now()
	var send []*Session
	var ends []keepAliveEnd
	k.mu.Lock()
	var popped []*Session
	for len(k.due) > 0 && !k.due[0].ka.due().After(now.Add(keepAliveWindow)) {
		popped = append(popped, heap.Pop(&k.due).(*Session))
	}
	for _, s := range popped {
		ka := &s.ka
		switch {
		case !ka.deadline.After(now):
			ka.ended = true
			ends = append(ends, keepAliveEnd{s, wire.Errorf(wire.SessionExpired,
				"lease %x: no keepalive acknowledged within its TTL of %s", s.lease, s.ttl)})
			continue
		case ka.sendAt.After(now.Add(keepAliveWindow)), ka.failures > 0 && ka.sendAt.After(now):
			// only the deadline is near, or a retry's backoff (which the
			// window must not cut short) has not passed: wait
		case ka.inflight:
			s.setState(Suspended) // the previous keepalive is overdue
			ka.sendAt = now.Add(s.ttl / 3)
		default:
			ka.inflight = true
			ka.sendAt = now.Add(s.ttl / 3) // unanswered by then: Suspended (settle reschedules)
			send = append(send, s)
		}
		heap.Push(&k.due, s)
	}
	var next time.Time
	if len(k.due) > 0 {
		next = k.due[0].ka.due()
	}
	k.armed = next
	k.mu.Unlock()
	for len(send) > 0 {
		n := min(len(send), maxLeasesPerFrame)
		batch := send[:n:n]
		k.c.wg.Add(1)
		go func() { defer k.c.wg.Done(); k.send(batch, now) }()
		send = send[n:]
	}
	for _, e := range ends {
		e.s.end(Lost, e.cause)
	}
	return next
}

func (k *keepAliveScheduler) send(batch []*Session, sent time.Time) {
	req := &wire.Request{Op: wire.OpKeepAlive, Leases: make([]uint64, len(batch))}
	for i, s := range batch {
		req.Leases[i] = s.lease
	}
	resp, err := k.c.once(k.c.ctx, req, k.c.cfg.requestTimeout)
	k.settle(batch, sent, resp, err)
	if resp != nil {
		k.c.noticed(resp.Events) // ended holds a pushed notice may have missed
	}
}

// settle applies a keepalive answer to the sessions it was for.
func (k *keepAliveScheduler) settle(batch []*Session, sent time.Time, resp *wire.Response, err error) {
	now := k.clock.Now()
	var ends []keepAliveEnd
	k.mu.Lock()
	for _, s := range batch {
		ka := &s.ka
		ka.inflight = false
		if ka.settled != nil {
			close(ka.settled)
			ka.settled = nil
		}
		if ka.ended {
			continue
		}
		r := keepAliveOutcome(s.lease, resp, err)
		switch {
		case r.gone:
			ka.ended = true
			k.removeLocked(s)
			ends = append(ends, keepAliveEnd{s, wire.Errorf(wire.SessionExpired, "lease %x: the service reports it gone", s.lease)})
			continue
		case r.err == nil:
			ka.failures = 0
			s.acked(sent)
			ka.deadline = sent.Add(s.ttl)
			ka.sendAt = now.Add(s.ttl / 3)
			s.setState(Connected)
		default:
			s.c.cfg.logger.Warn("warden: keepalive failed", "lease", wire.HexID(s.lease), "err", r.err)
			ka.sendAt = now.Add(min(s.c.cfg.backoff.Delay(ka.failures), s.ttl/3))
			ka.failures++
			s.setState(Suspended)
		}
		if ka.idx >= 0 {
			heap.Fix(&k.due, ka.idx)
		}
		k.wakeLocked(ka.due())
	}
	k.mu.Unlock()
	for _, e := range ends {
		e.s.end(Lost, e.cause)
	}
}

func (k *keepAliveScheduler) removeLocked(s *Session) {
	if s.ka.idx >= 0 {
		heap.Remove(&k.due, s.ka.idx)
	}
}

// stop takes a session off the schedule. It reports false if the session
// already ended; otherwise it returns once no keepalive of the session is
// in flight (a later revoke must not cross one).
func (k *keepAliveScheduler) stop(s *Session) bool {
	k.mu.Lock()
	if s.ka.ended {
		k.mu.Unlock()
		return false
	}
	s.ka.ended = true
	k.removeLocked(s)
	var settled chan struct{}
	if s.ka.inflight {
		settled = make(chan struct{})
		s.ka.settled = settled
	}
	k.mu.Unlock()
	if settled != nil {
		<-settled
	}
	return true
}

// keepAliveResult is one session's part of a shared answer.
type keepAliveResult struct {
	err  error
	gone bool // the service reported the lease gone
}

// keepAliveOutcome is one session's part of a shared answer. A lease the
// service reports gone settles that session, even when another shard failed
// and the answer as a whole is an error.
func keepAliveOutcome(lease uint64, resp *wire.Response, err error) keepAliveResult {
	r := keepAliveResult{err: err}
	r.gone = resp != nil && slices.Contains(resp.Leases, lease)
	if r.gone {
		r.err = wire.Errorf(wire.SessionExpired, "lease %x is gone", lease)
	}
	if errors.Is(err, context.Canceled) && r.err == nil {
		r.err = err
	}
	return r
}
