package router

import (
	"context"
	"time"

	"github.com/wardenlock/warden/wire"
)

// revokeEverywhere broadcasts a lease revocation to every serving shard.
// A shard answers RangeMoving when the lease holds a lock, a wait or a key
// in a range it has frozen for a move: that range's state (the lease's part
// in it included) is on its way to another shard, whose part of this
// broadcast may have been answered before the range arrived. So the part
// is not retried on its own; the whole broadcast is made again, on a fresh
// table, until no shard answers RangeMoving or the budget ends. A repeat
// carries a fresh (client, seq): revoking an ended lease changes nothing,
// and a shard's record of the first attempt must not answer for it.
func (s *Server) revokeEverywhere(req *wire.Request, done func(*wire.Response)) {
	deadline := time.Now().Add(s.budget(req))
	var attempt func(n int, r *wire.Request)
	attempt = func(n int, r *wire.Request) {
		s.broadcast(r, func(resp *wire.Response) {
			if resp.Code != wire.RangeMoving || !time.Now().Before(deadline) {
				done(resp)
				return
			}
			go func() {
				ctx, cancel := context.WithDeadline(context.Background(), deadline)
				defer cancel()
				s.cache.refresh(ctx)
				if retryBackoff.Wait(ctx, n) != nil {
					done(resp)
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
