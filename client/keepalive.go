package client

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/wardenlock/warden/wire"
)

// Keepalives of all the sessions of a client that fall due within a short
// window travel as one request naming every lease (Request.Leases), so a
// process with many sessions sends a few frames per round instead of one
// per session. Each session still runs its own schedule and deadline; only
// the transport is shared.

const (
	keepAliveWindow   = 2 * time.Millisecond
	maxLeasesPerFrame = 4096
)

type keepAliveWaiter struct {
	lease uint64
	sent  time.Time
	out   chan keepAliveResult
}

type keepAliveBatcher struct {
	c       *Client
	mu      sync.Mutex
	pending []keepAliveWaiter
	armed   bool
}

// submit queues one session's keepalive; its result arrives on out, which
// must have room for it (capacity 1, empty: a session has one keepalive in
// flight at a time and reuses its channel, so 100k sessions at TTL/3 do not
// allocate a channel per keepalive).
func (b *keepAliveBatcher) submit(lease uint64, sent time.Time, out chan keepAliveResult) chan keepAliveResult {
	b.mu.Lock()
	b.pending = append(b.pending, keepAliveWaiter{lease: lease, sent: sent, out: out})
	arm := !b.armed
	b.armed = true
	b.mu.Unlock()
	if arm {
		time.AfterFunc(keepAliveWindow, b.flush)
	}
	return out
}

func (b *keepAliveBatcher) flush() {
	b.mu.Lock()
	batch := b.pending
	b.pending = nil
	b.armed = false
	b.mu.Unlock()
	for len(batch) > 0 {
		n := min(len(batch), maxLeasesPerFrame)
		go b.send(batch[:n])
		batch = batch[n:]
	}
}

func (b *keepAliveBatcher) send(batch []keepAliveWaiter) {
	req := &wire.Request{Op: wire.OpKeepAlive, Leases: make([]uint64, len(batch))}
	for i, w := range batch {
		req.Leases[i] = w.lease
	}
	resp, err := b.c.once(b.c.ctx, req, b.c.cfg.requestTimeout)
	for _, w := range batch {
		w.out <- keepAliveOutcome(w, resp, err)
	}
}

// keepAliveOutcome is one session's part of a shared answer. A lease the
// service reports gone settles that session, even when another shard failed
// and the answer as a whole is an error.
func keepAliveOutcome(w keepAliveWaiter, resp *wire.Response, err error) keepAliveResult {
	r := keepAliveResult{sent: w.sent, err: err}
	r.gone = resp != nil && slices.Contains(resp.Leases, w.lease)
	if r.gone {
		r.err = wire.Errorf(wire.SessionExpired, "lease %x is gone", w.lease)
	}
	if errors.Is(err, context.Canceled) && r.err == nil {
		r.err = err
	}
	return r
}
