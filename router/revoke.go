package router

import (
	"context"
	"time"

	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/wire"
)

// revokeEverywhere broadcasts a lease revocation to every serving shard
// and makes it again while range moves got in its way. A range move takes
// the lease's locks, waits and keys in the range to another shard, and the
// broadcast's parts land on the shards at different moments: the
// destination may answer before the range arrives while the source answers
// after it left (its part retried past the move) or refuses while the
// range is frozen (RangeMoving, which is not retried on its own). So when a
// shard answered RangeMoving, or the range table changed between the
// broadcast's start and its end (a move switched, a range split), the
// whole broadcast is made again on the fresh table, until one runs on an
// unchanged table or the budget ends (then the answer is Ambiguous: it may
// not have reached every shard; revoking again is harmless). A repeat
// carries a fresh (client, seq): revoking an ended lease changes nothing,
// and a shard's record of an earlier attempt must not answer for it.
func (s *Server) revokeEverywhere(req *wire.Request, done func(*wire.Response)) {
	deadline := time.Now().Add(s.budget(req))
	var attempt func(n int, r *wire.Request)
	attempt = func(n int, r *wire.Request) {
		start := tableGen(s.cache.table())
		s.broadcast(r, func(resp *wire.Response) {
			go func() {
				ctx, cancel := context.WithDeadline(context.Background(), deadline)
				defer cancel()
				err := s.cache.refresh(ctx)
				settled := err == nil && tableGen(s.cache.table()) == start
				if settled && resp.Code != wire.RangeMoving || resp.Code != wire.OK && resp.Code != wire.RangeMoving {
					done(resp)
					return
				}
				if retryBackoff.Wait(ctx, n) != nil {
					done(&wire.Response{ID: resp.ID, Code: wire.Ambiguous,
						Msg: "range moves kept changing where the lease's locks live until the deadline: the revocation may not have reached every shard; revoke again"})
					return
				}
				next := *r
				next.Client, next.Seq, next.AckSeq = randomID(), 1, 0
				attempt(n+1, &next)
			}()
		})
	}
	attempt(0, req)
}

func tableGen(t *placement.Table) uint64 {
	if t == nil {
		return 0
	}
	return t.Gen
}
