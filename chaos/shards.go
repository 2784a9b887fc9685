package chaos

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/wardenlock/warden/client"
)

// shardChurn creates and retires data shards through the admin API while
// the faults run: it adds a shard (filled with ranges), waits until it is
// active, retires the oldest other active shard and waits until its ranges
// are out, and again, until the fault window ends. The workloads' checks
// cover the ranges that move meanwhile; check then waits until every shard
// has settled (active or retired) once the faults are healed.
type shardChurn struct {
	mu       sync.Mutex
	added    int
	retired  int
	refusals []string
}

func (s *shardChurn) refused(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.refusals) < 20 {
		s.refusals = append(s.refusals, fmt.Sprintf(format, args...))
	}
}

func (s *shardChurn) run(ctx context.Context, c *Cluster, window time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, window)
	defer cancel()
	cl, err := client.New(ctx, c.ClientAddrs(), client.WithRequestTimeout(5*time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	for ctx.Err() == nil {
		id, err := cl.AddShard(ctx, nil, false)
		if err != nil {
			s.refused("add: %v", err)
			sleepCtx(ctx, time.Second)
			continue
		}
		s.mu.Lock()
		s.added++
		s.mu.Unlock()
		if !s.await(ctx, cl, id, "active") {
			return nil
		}
		var old uint64
		for old == 0 && ctx.Err() == nil {
			shards, err := cl.Shards(ctx)
			if err != nil {
				sleepCtx(ctx, 500*time.Millisecond)
				continue
			}
			for _, sh := range shards {
				if sh.State == "active" && sh.ID != id && (old == 0 || sh.ID < old) {
					old = sh.ID
				}
			}
		}
		if err := cl.RetireShard(ctx, old); err != nil {
			s.refused("retire %d: %v", old, err)
			continue
		}
		s.mu.Lock()
		s.retired++
		s.mu.Unlock()
		if !s.await(ctx, cl, old, "stopping", "retired") {
			return nil
		}
	}
	return nil
}

// await polls the shard view until shard id is in one of states; false
// when ctx ended first.
func (s *shardChurn) await(ctx context.Context, cl *client.Client, id uint64, states ...string) bool {
	for ctx.Err() == nil {
		if st := shardState(ctx, cl, id); st != "" {
			for _, want := range states {
				if st == want {
					return true
				}
			}
		}
		sleepCtx(ctx, 300*time.Millisecond)
	}
	return false
}

func shardState(ctx context.Context, cl *client.Client, id uint64) string {
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	shards, err := cl.Shards(cctx)
	if err != nil {
		return ""
	}
	for _, sh := range shards {
		if sh.ID == id {
			return sh.State
		}
	}
	return ""
}

// check waits until every shard is active or retired (a creation under way
// at the window's end activates, a retirement finishes, every stopped
// replica is removed) and records what the churn did.
func (s *shardChurn) check(ctx context.Context, r *Result, c *Cluster) {
	s.mu.Lock()
	added, retired, refusals := s.added, s.retired, append([]string(nil), s.refusals...)
	s.mu.Unlock()
	if added == 0 {
		r.violate("shards: no shard was created during the fault window (%v)", refusals)
		return
	}
	cl, err := client.New(ctx, c.ClientAddrs(), client.WithRequestTimeout(5*time.Second))
	if err != nil {
		r.violate("shards: %v", err)
		return
	}
	defer cl.Close()
	deadline := time.Now().Add(2 * time.Minute)
	var last string
	for time.Now().Before(deadline) {
		last = unsettled(ctx, cl)
		if last == "" {
			break
		}
		sleepCtx(ctx, 500*time.Millisecond)
	}
	if last != "" {
		r.violate("shards: the lifecycle did not settle within 2 minutes of healing: %s", last)
		return
	}
	r.note("shards: %d created, %d retired under faults, all settled (%d refusals: %v)", added, retired, len(refusals), refusals)
}

// unsettled names a shard still creating, retiring or stopping ("" none).
func unsettled(ctx context.Context, cl *client.Client) string {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	shards, err := cl.Shards(cctx)
	if err != nil {
		return err.Error()
	}
	for _, sh := range shards {
		if sh.State != "active" && sh.State != "retired" {
			return fmt.Sprintf("shard %d is %s", sh.ID, sh.State)
		}
		if sh.State == "active" && sh.Leader == 0 {
			return fmt.Sprintf("shard %d has no leader", sh.ID)
		}
	}
	return ""
}
