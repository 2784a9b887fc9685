package router

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/wardenlock/warden/internal/backoff"
	"github.com/wardenlock/warden/wire"
)

// route executes req wherever its shard lives and retries routing and
// availability errors (refreshing the table and leader view between tries)
// until the retry budget runs out. Retries are safe: mutating requests
// carry (client, seq), which the state machine deduplicates.
func (s *Server) route(req *wire.Request, done func(*wire.Response)) {
	s.routeUntil(req, time.Now().Add(s.budget(req)), wire.AnswerFunc(done))
}

// routeUntil is route with its own deadline for the retries.
func (s *Server) routeUntil(req *wire.Request, deadline time.Time, done wire.Answerer) {
	t := &routeTry{s: s, req: req, deadline: deadline.Sub(epoch), done: done}
	t.start()
}

func (s *Server) budget(req *wire.Request) time.Duration {
	b := s.cfg.RequestTimeout
	if req.Wait > 0 {
		b += time.Duration(req.Wait) * time.Millisecond
	}
	return b
}

// routeTry is one routed request's retry state. Every attempt answers to
// it (one object for all of them, not a closure per attempt), and it
// either passes the answer on to done or starts the next attempt.
//
// A try on behalf of a client connection has quit set: once it is closed
// (the connection is gone) no more attempts are made. The client sends the
// request again through another connection with the same (client, seq); a
// copy this router kept retrying would only compete with it (a shard keeps
// one parked copy of a wait and answers the older one Superseded).
type routeTry struct {
	s        *Server
	req      *wire.Request
	deadline time.Duration // monoNow when the retries end
	attempt  int32
	// parked and acked are a client call's bookkeeping (call in conn.go),
	// kept here, where they pack beside attempt, so a call stays within
	// 512 bytes.
	parked, acked bool
	quit          <-chan struct{} // nil: never closed
	done          wire.Answerer
}

func (t *routeTry) start() { t.s.dispatch(t.req, t) }

// Answer takes one attempt's answer.
func (t *routeTry) Answer(resp *wire.Response) {
	if !retryable(t.req, resp) || monoNow() > t.deadline || giveUpUnavailable(resp, int(t.attempt)) || closed(t.quit) {
		t.done.Answer(resp)
		return
	}
	t.s.cache.learn(resp.Hint)
	go t.retry(resp)
}

// retry waits out the backoff (refreshing the table first when the answer
// says it is stale) and makes the next attempt, or gives resp as the answer
// when the budget or the connection ends first.
func (t *routeTry) retry(resp *wire.Response) {
	ctx, cancel := context.WithDeadline(context.Background(), epoch.Add(t.deadline))
	defer cancel()
	if resp.Code == wire.WrongShard || resp.Code == wire.RangeMoving || resp.Code == wire.Unavailable && t.s.cache.table() == nil {
		t.s.cache.refresh(ctx)
	}
	if retryBackoff.Wait(ctx, int(t.attempt)) != nil || closed(t.quit) {
		t.done.Answer(resp)
		return
	}
	t.attempt++
	t.start()
}

// closed reports whether quit (nil: never) is closed.
func closed(quit <-chan struct{}) bool {
	select {
	case <-quit:
		return true
	default:
		return false
	}
}

// giveUpUnavailable: a shard with no reachable leader from here (an
// election, or this node cut off from the majority) is reported at once
// after a second try, so the client hears a clear Unavailable within its own
// timeout and can try another node, instead of this node holding the
// request until the client gives up with an ambiguous timeout. Routing
// errors with a known leader elsewhere are retried for the whole budget.
func giveUpUnavailable(resp *wire.Response, attempt int) bool {
	return resp.Code == wire.Unavailable && attempt >= 1
}

// retryable: routing and availability errors always (but a revocation's
// RangeMoving); an ambiguous outcome only when the request is deduplicated
// by (client, seq).
func retryable(req *wire.Request, resp *wire.Response) bool {
	if req.Op == wire.OpRevoke && resp.Code == wire.RangeMoving {
		return false // the whole revocation is broadcast again (revoke.go)
	}
	if resp.Code == wire.Ambiguous {
		return req.Client != 0 && req.Seq != 0
	}
	return resp.Code.Retryable()
}

// retryBackoff spaces a request's routing retries: an election is over in
// a few hundred ms, so the ceiling stops at 320 ms.
var retryBackoff = backoff.Policy{Base: 5 * time.Millisecond, Max: 320 * time.Millisecond}

// dispatch makes one attempt: locate the shard, then run the request on the
// local replica or forward it to the node that leads the shard.
func (s *Server) dispatch(req *wire.Request, done wire.Answerer) {
	shardID := req.Shard
	if shardID == 0 {
		t := s.cache.table()
		if t == nil {
			done.Answer(&wire.Response{ID: req.ID, Code: wire.Unavailable, Msg: "range table not loaded yet"})
			return
		}
		r, err := t.Locate(req.Path)
		if err != nil {
			done.Answer(errorResponse(req.ID, err))
			return
		}
		shardID = r.Shard
		req.Gen = r.Gen
	}
	s.dispatchTo(shardID, req, done)
}

func (s *Server) dispatchTo(shardID uint64, req *wire.Request, done wire.Answerer) {
	h := s.cfg.Host
	if h != nil {
		if local, ok := h.Replica(shardID); ok {
			addr, self := s.cache.leaderAddr(shardID)
			if self || addr == "" || localReadOK(req) {
				done = s.traceKeepAliveAttempt(req, "local", done)
				local.SubmitTo(req, done)
				return
			}
			done = s.traceKeepAliveAttempt(req, addr, done)
			s.forward(addr, shardID, req, leaderHinted(shardID, addr, done))
			return
		}
	}
	addr, _ := s.cache.leaderAddr(shardID)
	done = s.traceKeepAliveAttempt(req, addr, done) // no local replica
	if addr != "" {
		s.forward(addr, shardID, req, leaderHinted(shardID, addr, done))
		return
	}
	if localReadOK(req) || h != nil {
		// A node without a replica of the shard (it joined, or the replica
		// moved away) and no leader heard of: any replica proposes on the
		// leader's behalf, and its NotLeader answers teach us the leader.
		addr = s.cache.anyReplicaAddr(shardID)
	}
	if addr == "" {
		done.Answer(&wire.Response{ID: req.ID, Code: wire.Unavailable, Msg: "no known leader for the shard",
			Hint: &wire.Hint{Shard: shardID}})
		return
	}
	s.forward(addr, shardID, req, done.Answer)
}

// leaderHinted names the shard leader a request was forwarded to in its
// answer (unless the answer carries a hint of its own), so a client that
// routes directly and sent it here on a stale leader view learns the leader
// from the answer instead of at its next table refresh: without this, every
// request after a leader change costs a forwarding hop until then.
func leaderHinted(shardID uint64, leader string, done wire.Answerer) func(*wire.Response) {
	return func(r *wire.Response) {
		if r.Hint == nil && !r.Code.Retryable() {
			r.Hint = &wire.Hint{Shard: shardID, Leader: leader}
		}
		done.Answer(r)
	}
}

// localReadOK: reads are linearizable on any replica (read index), so they
// need not travel to the leader.
func localReadOK(req *wire.Request) bool {
	switch req.Op {
	case wire.OpKVGet, wire.OpKVList, wire.OpLeader:
		return true
	}
	return false
}

func (s *Server) forward(addr string, shardID uint64, req *wire.Request, done func(*wire.Response)) {
	p, err := s.peers.get(addr)
	if err != nil {
		done(&wire.Response{ID: req.ID, Code: wire.Unavailable, Msg: "cannot reach the shard leader: " + err.Error(),
			Hint: &wire.Hint{Shard: shardID}})
		return
	}
	fwd := *req
	fwd.Shard = shardID
	s.forwarded.Add(1)
	p.send(&fwd, done)
}

// forwardInternal runs an internal op of the local host (a range-move step)
// on a shard this node has no replica of: at the shard's leader as far as
// this node knows, or any replica. The far side accepts it only over a
// peer connection (conn.handle). One attempt: the host's driver retries.
func (s *Server) forwardInternal(shardID uint64, req *wire.Request, done func(*wire.Response)) {
	s.dispatchTo(shardID, req, wire.AnswerFunc(func(r *wire.Response) {
		s.cache.learn(r.Hint)
		done(r)
	}))
}

// execLocal runs a request forwarded by another node on the local replica,
// without routing it again.
func (s *Server) execLocal(req *wire.Request, done wire.Answerer) {
	h := s.cfg.Host
	if h == nil {
		done.Answer(&wire.Response{ID: req.ID, Code: wire.WrongShard, Msg: "a standalone router holds no replicas"})
		return
	}
	local, ok := h.Replica(req.Shard)
	if !ok {
		done.Answer(&wire.Response{ID: req.ID, Code: wire.WrongShard, Msg: "this node has no replica of the shard",
			Hint: &wire.Hint{Shard: req.Shard}})
		return
	}
	local.SubmitTo(req, done)
}

type fanIn struct {
	mu   sync.Mutex
	n    int
	out  *wire.Response
	done func(*wire.Response)
}

func (f *fanIn) add(r *wire.Response) {
	f.mu.Lock()
	if r.Code != wire.OK && f.out.Code == wire.OK {
		f.out.Code, f.out.Msg = r.Code, r.Msg
	}
	f.out.Leases = append(f.out.Leases, r.Leases...)
	f.out.Denied = append(f.out.Denied, r.Denied...)
	f.out.Holders = append(f.out.Holders, r.Holders...)
	f.out.KVs = append(f.out.KVs, r.KVs...)
	f.out.Events = append(f.out.Events, r.Events...)
	f.n--
	last := f.n == 0
	f.mu.Unlock()
	if last {
		f.done(f.out)
	}
}

func errorResponse(id uint64, err error) *wire.Response {
	var ce *wire.CompactedError
	if errors.As(err, &ce) {
		return ce.Response(id)
	}
	if we, ok := err.(*wire.Error); ok {
		return &wire.Response{ID: id, Code: we.Code, Msg: we.Detail}
	}
	return &wire.Response{ID: id, Code: wire.Internal, Msg: err.Error()}
}
