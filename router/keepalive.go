package router

import (
	"slices"
	"sync"
	"time"

	"github.com/wardenlock/warden/internal/leasetrace"
	"github.com/wardenlock/warden/wire"
)

// A session's lease lives on every shard it has touched, so a keepalive goes
// to every shard leader. Sent one by one, 100k sessions at TTL/3 would be
// millions of messages a second; instead the router gathers the keepalives
// of all its connections for a few milliseconds and sends one multi-lease
// keepalive per shard, then hands each caller the part of the answer that
// concerns its leases.

const keepAliveWindow = 2 * time.Millisecond

type keepAliveCall struct {
	id       uint64
	leases   []uint64
	identity string // leases are checked against it (bound leases, auth on)
	done     func(*wire.Response)
}

type keepAliveBatcher struct {
	s       *Server
	mu      sync.Mutex
	pending []keepAliveCall
	armed   bool
}

func (s *Server) keepAlive(req *wire.Request, done func(*wire.Response)) {
	leases := req.Leases
	if req.Lease != 0 {
		leases = append([]uint64{req.Lease}, leases...)
	}
	if len(leases) == 0 {
		done(&wire.Response{ID: req.ID, Code: wire.InvalidArgument, Msg: "keepalive names no lease"})
		return
	}
	b := &s.keepAlives
	b.mu.Lock()
	b.s = s
	b.pending = append(b.pending, keepAliveCall{id: req.ID, leases: leases, identity: req.Identity, done: done})
	arm := !b.armed
	b.armed = true
	b.mu.Unlock()
	if arm {
		time.AfterFunc(keepAliveWindow, b.flush)
	}
}

func (b *keepAliveBatcher) flush() {
	b.mu.Lock()
	calls := b.pending
	b.pending = nil
	b.armed = false
	b.mu.Unlock()
	// One round per identity: each shard checks the leases against the
	// identity that asks (with auth off there is one group, "").
	groups := map[string][]keepAliveCall{}
	var order []string
	for _, c := range calls {
		if _, ok := groups[c.identity]; !ok {
			order = append(order, c.identity)
		}
		groups[c.identity] = append(groups[c.identity], c)
	}
	for _, id := range order {
		calls := groups[id]
		var all []uint64
		for _, c := range calls {
			all = append(all, c.leases...)
		}
		b.s.keepAliveShards(all, id, func(resp *wire.Response) { splitKeepAlive(calls, resp) })
	}
}

// splitKeepAlive answers each merged caller with the shared outcome and the
// gone leases, and the notices of ended holds (lease/lost.go), that
// are its own.
func splitKeepAlive(calls []keepAliveCall, resp *wire.Response) {
	gone := make(map[uint64]bool, len(resp.Leases))
	for _, id := range resp.Leases {
		gone[id] = true
	}
	denied := make(map[uint64]bool, len(resp.Denied))
	for _, id := range resp.Denied {
		denied[id] = true
	}
	for _, c := range calls {
		out := &wire.Response{ID: c.id, Code: resp.Code, Msg: resp.Msg}
		for _, id := range c.leases {
			if gone[id] {
				out.Leases = append(out.Leases, id)
			}
			if denied[id] {
				out.Denied = append(out.Denied, id)
			}
		}
		for _, ev := range resp.Events {
			if !denied[ev.Lease] && slices.Contains(c.leases, ev.Lease) {
				out.Events = append(out.Events, ev)
			}
		}
		c.done(out)
	}
}

// keepAliveShards sends one keepalive for leases to every data shard's
// leader and answers once all have: OK with the leases any shard reports
// gone, or the first failure (those sessions are then suspended and their
// clients retry).
func (s *Server) keepAliveShards(leases []uint64, identity string, done func(*wire.Response)) {
	t := s.cache.table()
	if t == nil {
		done(&wire.Response{Code: wire.Unavailable, Msg: "range table not loaded yet"})
		return
	}
	serving := t.Serving() // a shard being created holds no lease yet
	if len(serving) == 0 {
		done(&wire.Response{Code: wire.Unavailable, Msg: "no data shard serves yet"})
		return
	}
	agg := &fanIn{n: len(serving), done: done, out: &wire.Response{}}
	deadline := time.Now().Add(s.cfg.RequestTimeout)
	for _, si := range serving {
		sub := &wire.Request{Op: wire.OpKeepAlive, Leases: leases, Shard: si.ID, Identity: identity}
		add := agg.add
		if leasetrace.On {
			add = s.traceSubKeepAlive(sub, add)
		}
		s.routeUntil(sub, deadline, s.goneTolerant(si.ID, add))
	}
}

// traceSubKeepAlive logs the final answer to one shard's keepalive
// sub-request (internal/leasetrace).
func (s *Server) traceSubKeepAlive(sub *wire.Request, done func(*wire.Response)) func(*wire.Response) {
	sent := time.Now()
	return func(r *wire.Response) {
		s.log.Info("lease trace: keepalive sub-answer", "shard", sub.Shard, "leases", sub.Leases, "sent", leasetrace.Time(sent),
			"code", r.Code, "detail", r.Msg, "gone", r.Leases)
		done(r)
	}
}

// traceKeepAliveAttempt, with the lease trace on, wraps done to log where
// one attempt of a keepalive sub-request went (this node's replica or
// another node) and what came back; otherwise it returns done.
func (s *Server) traceKeepAliveAttempt(req *wire.Request, target string, done wire.Answerer) wire.Answerer {
	if !leasetrace.On || req.Op != wire.OpKeepAlive {
		return done
	}
	at := time.Now()
	return wire.AnswerFunc(func(r *wire.Response) {
		s.log.Info("lease trace: keepalive attempt", "shard", req.Shard, "leases", req.Leases, "target", target,
			"at", leasetrace.Time(at), "code", r.Code, "detail", r.Msg, "gone", r.Leases)
		done.Answer(r)
	})
}
