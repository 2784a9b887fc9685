package router

import (
	"context"

	"github.com/wardenlock/warden/auth"
	"github.com/wardenlock/warden/hierarchy"
	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/wire"
)

// Query runs one read (ListLocks, LockInfo, KVList, KVGet, Leader) through
// this router's routing, exactly as a client's request would go: validated,
// sent to the owning shard (local replica or the leader's node), retried on
// routing errors, fanned out when a prefix spans every shard. The admin API
// uses it so its answers are the ones clients see.
func (s *Server) Query(ctx context.Context, req *wire.Request) (*wire.Response, error) {
	switch req.Op {
	case wire.OpListLocks, wire.OpLockInfo, wire.OpKVList, wire.OpKVGet, wire.OpLeader:
	default:
		return nil, wire.Errorf(wire.InvalidArgument, "router: %v is not an admin query", req.Op)
	}
	if err := hierarchy.Validate(req.Path, s.cfg.Paths); err != nil {
		return nil, err
	}
	q := *req
	q.Shard = 0
	answer := make(chan *wire.Response, 1) // buffered: the caller may have gone
	done := func(r *wire.Response) { answer <- r }
	if (q.Op == wire.OpListLocks || q.Op == wire.OpKVList) && s.spansShards(q.Path) {
		s.broadcast(&q, done)
	} else {
		s.route(&q, done)
	}
	select {
	case r := <-answer:
		return r, r.AsError()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Table returns the range table this router routes by (nil until loaded).
func (s *Server) Table() *placement.Table { return s.cache.table() }

// Policy is the auth policy in use (nil: authentication is off). It changes
// when SetPolicy puts a reloaded one in place, so read it per request.
func (s *Server) Policy() *auth.Policy { return s.policy() }
