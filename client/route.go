package client

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wardenlock/warden/wire"
)

// Direct routing: the client learns the range table and each shard's leader
// (OpRanges) and sends a request on a path straight to the node leading its
// shard, saving the hop a node makes when it forwards to the leader. Any node
// still routes correctly, so a stale table costs a hop, never a wrong answer:
// a NotLeader or WrongShard answer refreshes the table and the request is
// retried as usual. Requests without a path, and everything while no direct
// connection is up, go through the pool.
type directRouter struct {
	c     *Client
	table atomic.Pointer[wire.RouteTable]

	refreshing atomic.Bool
	// conns maps leader addresses to direct connections. Every routed
	// request reads it; it changes only when a connection is made or lost,
	// so it is copied on write (under mu) and read without a lock.
	conns   atomic.Pointer[map[string]*conn]
	mu      sync.Mutex
	dialing map[string]bool
}

func newDirectRouter(c *Client) *directRouter {
	r := &directRouter{c: c, dialing: map[string]bool{}}
	r.conns.Store(&map[string]*conn{})
	return r
}

// setConn replaces addr's connection (nil: removes it). The caller holds mu.
func (r *directRouter) setConn(addr string, cn *conn) {
	old := *r.conns.Load()
	m := make(map[string]*conn, len(old)+1)
	for a, c := range old {
		m[a] = c
	}
	if cn == nil {
		delete(m, addr)
	} else {
		m[addr] = cn
	}
	r.conns.Store(&m)
}

// run refreshes the table periodically until the client closes.
func (r *directRouter) run() {
	t := time.NewTicker(r.c.cfg.routeRefresh)
	defer t.Stop()
	r.refresh()
	for {
		select {
		case <-r.c.ctx.Done():
			r.closeAll()
			return
		case <-t.C:
			r.refresh()
		}
	}
}

// refresh fetches the table once; concurrent calls coalesce.
func (r *directRouter) refresh() {
	if !r.refreshing.CompareAndSwap(false, true) {
		return
	}
	defer r.refreshing.Store(false)
	ctx, cancel := context.WithTimeout(r.c.ctx, r.c.cfg.requestTimeout)
	defer cancel()
	cn, err := r.c.pool.pick(ctx)
	if err != nil {
		return
	}
	resp, _, err := cn.roundTrip(ctx, &wire.Request{Op: wire.OpRanges}, r.c.cfg.requestTimeout)
	if err == nil && resp.Code == wire.OK && resp.Table != nil {
		r.table.Store(resp.Table)
	}
}

// learn takes a shard leader named in an answer's hint: a node that
// forwarded a request to the leader says so in its answer, and a NotLeader
// answer names the leader too. Without it the client keeps sending every
// request on the shard to a node that forwards it until the next periodic
// refresh (seen as 30 % of a run's acquires forwarded by a follower).
func (r *directRouter) learn(h *wire.Hint) {
	if h == nil || h.Leader == "" || h.Shard == 0 {
		return
	}
	for {
		t := r.table.Load()
		if t == nil || t.LeaderAddr(h.Shard) == h.Leader {
			return
		}
		nt := *t
		nt.Leaders = make([]wire.ShardLeader, 0, len(t.Leaders)+1)
		found := false
		for _, l := range t.Leaders {
			if l.Shard == h.Shard {
				l.Addr, found = h.Leader, true
			}
			nt.Leaders = append(nt.Leaders, l)
		}
		if !found {
			nt.Leaders = append(nt.Leaders, wire.ShardLeader{Shard: h.Shard, Addr: h.Leader})
		}
		if r.table.CompareAndSwap(t, &nt) {
			return
		}
	}
}

// stale is told about a routing error: refresh soon, off the caller's path.
func (r *directRouter) stale() {
	if !r.refreshing.Load() {
		go r.refresh()
	}
}

// routable ops name one path that a single shard serves.
func routable(req *wire.Request) bool {
	if req.Path == "" || req.Has(wire.FlagPrefix) {
		return false
	}
	switch req.Op {
	case wire.OpAcquire, wire.OpRelease, wire.OpRenew, wire.OpCancel, wire.OpLockInfo,
		wire.OpKVGet, wire.OpKVPut, wire.OpKVDelete, wire.OpCampaign, wire.OpProclaim,
		wire.OpResign, wire.OpLeader, wire.OpAcquireMulti, wire.OpRevokeLock, wire.OpHandOver:
		return true
	}
	return false
}

// pick returns a direct connection to req's shard leader when one is up, or
// a pool connection. rc, when not nil, is req.Path's routeCache.
func (r *directRouter) pick(ctx context.Context, req *wire.Request, rc *routeCache) (*conn, error) {
	if t := r.table.Load(); t != nil && routable(req) {
		conns := r.conns.Load()
		if cn := rc.lookup(t, conns); cn != nil {
			return cn, nil
		}
		if shard, ok := t.Locate(req.Path); ok {
			if addr := t.LeaderAddr(shard); addr != "" {
				if cn := r.conn(addr); cn != nil {
					rc.remember(t, conns, cn)
					return cn, nil
				}
			}
		}
	}
	return r.c.pool.pick(ctx)
}

// routeCache remembers the direct connection one path's requests went to,
// for a caller that sends many on the same path (a Mutex): locating the
// path in the table (hashing its namespace, searching the ranges), naming
// the shard's leader and finding its connection was a twentieth of a load
// generator's CPU. The answer holds while the table and the set of direct
// connections are the ones it was found in (both are replaced, never
// changed, when they change) and the connection is up. A nil cache
// remembers nothing.
type routeCache struct{ last atomic.Pointer[routeEntry] }

type routeEntry struct {
	table *wire.RouteTable
	conns *map[string]*conn
	cn    *conn
}

// lookup returns the remembered connection if it is still the answer.
func (rc *routeCache) lookup(t *wire.RouteTable, conns *map[string]*conn) *conn {
	if rc == nil {
		return nil
	}
	if e := rc.last.Load(); e != nil && e.table == t && e.conns == conns && !e.cn.broken() {
		return e.cn
	}
	return nil
}

func (rc *routeCache) remember(t *wire.RouteTable, conns *map[string]*conn, cn *conn) {
	if rc != nil {
		rc.last.Store(&routeEntry{table: t, conns: conns, cn: cn})
	}
}

// conn returns a live direct connection to addr, starting a dial in the
// background when there is none (the caller uses the pool meanwhile).
func (r *directRouter) conn(addr string) *conn {
	if cn := (*r.conns.Load())[addr]; cn != nil && !cn.broken() {
		return cn
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if cn := (*r.conns.Load())[addr]; cn != nil && !cn.broken() {
		return cn
	}
	if !r.dialing[addr] && r.c.ctx.Err() == nil {
		r.dialing[addr] = true
		go r.dial(addr)
	}
	return nil
}

func (r *directRouter) dial(addr string) {
	ctx, cancel := context.WithTimeout(r.c.ctx, r.c.cfg.dialTimeout)
	defer cancel()
	cn, err := dial(ctx, addr, &r.c.cfg, r.c.id, func(cn *conn) {
		r.mu.Lock()
		if (*r.conns.Load())[addr] == cn {
			r.setConn(addr, nil)
		}
		r.mu.Unlock()
	})
	if err == nil {
		// Before any request: the grants of locks without a session
		// answered on it are registered on its hold stream (held.go).
		cn.openHolds(holdSink{r.c})
	}
	r.mu.Lock()
	delete(r.dialing, addr)
	if err == nil {
		if r.c.ctx.Err() != nil {
			r.mu.Unlock()
			cn.close(ErrClientClosed)
			return
		}
		r.setConn(addr, cn)
	}
	r.mu.Unlock()
	if err != nil {
		r.c.cfg.logger.Debug("warden: direct connection failed", "addr", addr, "err", err)
	}
}

func (r *directRouter) closeAll() {
	r.mu.Lock()
	conns := *r.conns.Load()
	r.conns.Store(&map[string]*conn{})
	r.mu.Unlock()
	for _, cn := range conns {
		cn.close(ErrClientClosed)
	}
}
