package router

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"golang.org/x/sync/singleflight"

	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/wire"
)

// RouteInfo is what OpRanges returns in Response.Value (msgpack): the table
// and the leaders the answering node knows. A standalone router lives on it.
type RouteInfo struct {
	Table   *placement.Table  `msgpack:"table"`
	Leaders map[uint64]uint64 `msgpack:"leaders"`
}

// rangeCache answers "which shard, which leader". Inside a node it reads the
// host's table and leader view; a standalone router caches what a seed node
// told it and refreshes on routing errors, coalescing concurrent refreshes.
type rangeCache struct {
	s  *Server
	sf singleflight.Group

	mu      sync.RWMutex
	info    RouteInfo
	fetched time.Time
	hinted  map[uint64]string // shard → leader address learnt from NotLeader hints
}

func newRangeCache(s *Server) *rangeCache {
	return &rangeCache{s: s, hinted: map[uint64]string{}}
}

func (rc *rangeCache) table() *placement.Table {
	if h := rc.s.cfg.Host; h != nil {
		return h.Table()
	}
	rc.mu.RLock()
	defer rc.mu.RUnlock()
	return rc.info.Table
}

// leaderAddr returns the client address of the shard leader's node, "" when
// unknown, and whether that node is this one.
func (rc *rangeCache) leaderAddr(shardID uint64) (string, bool) {
	t := rc.table()
	if t == nil {
		return "", false
	}
	var leader uint64
	if h := rc.s.cfg.Host; h != nil {
		leader = h.Leader(shardID)
		if leader == h.NodeID() {
			return "", true
		}
		if _, local := h.Replica(shardID); !local {
			// No local replica (replicas move between machines): the
			// leader as other nodes told us.
			rc.mu.RLock()
			a := rc.hinted[shardID]
			rc.mu.RUnlock()
			if a != "" {
				return a, false
			}
		}
	} else {
		rc.mu.RLock()
		if a := rc.hinted[shardID]; a != "" {
			rc.mu.RUnlock()
			return a, false
		}
		leader = rc.info.Leaders[shardID]
		rc.mu.RUnlock()
	}
	if n, ok := t.Node(leader); ok {
		return n.ClientAddr, false
	}
	return "", false
}

// anyReplicaAddr returns a node holding a replica of the shard (for reads
// and watches when the leader is unknown).
func (rc *rangeCache) anyReplicaAddr(shardID uint64) string {
	if addrs := rc.replicaAddrs(shardID); len(addrs) > 0 {
		return addrs[0]
	}
	return ""
}

// replicaAddrs returns the client addresses of the nodes holding a replica
// of the shard, in the table's order.
func (rc *rangeCache) replicaAddrs(shardID uint64) []string {
	t := rc.table()
	if t == nil {
		return nil
	}
	si, ok := t.Shard(shardID)
	if !ok {
		return nil
	}
	var out []string
	for _, id := range si.Replicas {
		if n, ok := t.Node(id); ok && n.ClientAddr != "" {
			out = append(out, n.ClientAddr)
		}
	}
	return out
}

func (rc *rangeCache) learn(hint *wire.Hint) {
	if hint == nil || hint.Shard == 0 {
		return
	}
	rc.mu.Lock()
	if hint.Leader == "" {
		delete(rc.hinted, hint.Shard) // the hinted node no longer leads it (or holds it)
	} else {
		rc.hinted[hint.Shard] = hint.Leader
	}
	rc.mu.Unlock()
}

// refreshTimeout bounds one table read (at least the dial timeout, for a
// standalone router's seeds). A read index sent to a meta leader
// that dies before answering is only resolved by its timeout; with the
// caller's deadline (a waiting acquire's whole wait) every request routed
// meanwhile would wait behind it, and a blocked acquire would never hear its
// grant.
const refreshTimeout = 2 * time.Second

// refresh re-reads the table (and, standalone, the leaders). Concurrent
// calls share one read, bounded by refreshTimeout whatever their deadlines;
// each caller stops waiting when its own ctx ends.
func (rc *rangeCache) refresh(ctx context.Context) error {
	ch := rc.sf.DoChan("refresh", func() (any, error) {
		rctx, cancel := context.WithTimeout(context.Background(), max(refreshTimeout, rc.s.cfg.DialTimeout))
		defer cancel()
		if h := rc.s.cfg.Host; h != nil {
			_, err := h.RefreshTable(rctx)
			return nil, err
		}
		return nil, rc.fetch(rctx)
	})
	select {
	case r := <-ch:
		return r.Err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (rc *rangeCache) fetch(ctx context.Context) error {
	var lastErr error = errors.New("router: no seed nodes configured")
	for _, addr := range rc.s.cfg.Seeds {
		info, err := rc.fetchFrom(ctx, addr)
		if err != nil {
			lastErr = err
			continue
		}
		rc.mu.Lock()
		if rc.info.Table == nil || info.Table.Gen >= rc.info.Table.Gen {
			rc.info = *info
			rc.hinted = map[uint64]string{}
			rc.fetched = time.Now()
		}
		rc.mu.Unlock()
		return nil
	}
	return lastErr
}

func (rc *rangeCache) fetchFrom(ctx context.Context, addr string) (*RouteInfo, error) {
	p, err := rc.s.peers.get(addr)
	if err != nil {
		return nil, err
	}
	ch := make(chan *wire.Response, 1)
	p.send(&wire.Request{Op: wire.OpRanges}, func(r *wire.Response) { ch <- r })
	select {
	case r := <-ch:
		if err := r.AsError(); err != nil {
			return nil, err
		}
		var info RouteInfo
		if err := msgpack.Unmarshal(r.Value, &info); err != nil {
			return nil, err
		}
		if info.Table == nil {
			return nil, wire.Errorf(wire.Unavailable, "node %s has no range table yet", addr)
		}
		return &info, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// routeInfo is what this node answers to OpRanges.
func (s *Server) routeInfo() RouteInfo {
	info := RouteInfo{Table: s.cache.table(), Leaders: map[uint64]uint64{}}
	if h := s.cfg.Host; h != nil {
		for _, id := range h.ShardIDs() {
			info.Leaders[id] = h.Leader(id)
		}
		return info
	}
	s.cache.mu.RLock()
	for k, v := range s.cache.info.Leaders {
		info.Leaders[k] = v
	}
	s.cache.mu.RUnlock()
	return info
}

// routeTable is the client-facing form of the route info: ranges plus the
// client address of each shard's leader, so smart clients can skip a hop.
func (s *Server) routeTable(info RouteInfo) *wire.RouteTable {
	t := info.Table
	if t == nil {
		return nil
	}
	rt := &wire.RouteTable{Gen: t.Gen, Depth: t.NamespaceDepth, Ranges: t.Ranges}
	for _, si := range t.Shards {
		addr := ""
		if n, ok := t.Node(info.Leaders[si.ID]); ok {
			addr = n.ClientAddr
		}
		rt.Leaders = append(rt.Leaders, wire.ShardLeader{Shard: si.ID, Addr: addr})
	}
	return rt
}
