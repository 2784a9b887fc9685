package statemachine

import (
	"slices"
	"strings"

	"github.com/wardenlock/warden/wire"
)

// model is the reference for the lock rules: plain lists scanned in full,
// written to be obviously right rather than fast. It covers acquire (try and
// wait, both modes, reentrancy, upgrade, self-conflict), release, renew,
// revoke, expire, cancel and exactly-once retries.
type model struct {
	cfg      Config
	now      int64
	fence    uint64
	arrivals uint64
	holders  []*mHolder
	waiters  []*mWaiter // arrival order
	leases   map[uint64]bool
	singles  map[uint64]bool
	tombs    map[uint64]int64
	clients  map[uint64]*mClient
}

type mHolder struct {
	path  string
	mode  wire.Mode
	lease uint64
	owner string
	token uint64
	count uint32
}

type mWaiter struct {
	path        string
	mode        wire.Mode
	lease       uint64
	owner       string
	client, seq uint64
	arrival     uint64
}

type mClient struct {
	floor    uint64
	lastSeen int64
	recs     map[uint64]*mRecord
}

type mRecord struct {
	op   wire.Op
	resp mResp
	w    *mWaiter
	// lingering: resolved after the floor had passed it; kept until a later
	// request acknowledges above it.
	lingering bool
}

// mResp is the part of a response the model predicts.
type mResp struct {
	code   wire.Code
	token  uint64
	lease  uint64
	count  uint32
	grants []wire.Grant
}

func newModel(cfg Config) *model {
	return &model{cfg: cfg, leases: map[uint64]bool{}, singles: map[uint64]bool{}, tombs: map[uint64]int64{},
		clients: map[uint64]*mClient{}}
}

func related(a, b string) bool {
	if a == "/" || b == "/" || a == b {
		return true
	}
	return strings.HasPrefix(b, a+"/") || strings.HasPrefix(a, b+"/")
}

// entry mirrors Update: time moves, old records and tombstones go, then
// each op runs in order.
func (m *model) entry(now int64, reqs []*wire.Request) []mResp {
	m.now = max(m.now, now)
	for id, at := range m.tombs {
		if at+m.cfg.TombstoneMs <= m.now {
			delete(m.tombs, id)
		}
	}
	for id, c := range m.clients {
		if c.lastSeen+m.cfg.ClientIdleMs <= m.now {
			if c.waiting() > 0 {
				c.lastSeen = m.now
			} else {
				delete(m.clients, id)
			}
		}
	}
	out := make([]mResp, len(reqs))
	for i, r := range reqs {
		out[i] = m.apply(r)
	}
	return out
}

func (c *mClient) waiting() int {
	n := 0
	for _, r := range c.recs {
		if r.w != nil {
			n++
		}
	}
	return n
}

func (m *model) apply(r *wire.Request) mResp {
	if r.Client == 0 || !dedupable(r.Op) {
		resp, _ := m.exec(r)
		return resp
	}
	c := m.clients[r.Client]
	if c == nil {
		c = &mClient{recs: map[uint64]*mRecord{}}
		m.clients[r.Client] = c
	}
	c.lastSeen = m.now
	if r.AckSeq > c.floor {
		c.floor = r.AckSeq
	}
	for seq, rec := range c.recs {
		switch {
		case rec.lingering && seq < r.AckSeq && seq != r.Seq:
			delete(c.recs, seq) // acknowledged after its resolution
		case !rec.lingering && rec.w == nil && seq < c.floor:
			delete(c.recs, seq)
		}
	}
	if rec := c.recs[r.Seq]; rec != nil {
		resp := rec.resp
		resp.grants = nil
		if rec.w != nil {
			resp.code = wire.Queued
		}
		// A replayed grant whose hold has ended is not handed out again.
		if (r.Op == wire.OpAcquire || r.Op == wire.OpCampaign) && resp.code == wire.OK && resp.token != 0 &&
			m.holderByToken(r.Path, resp.token) == nil {
			return mResp{code: wire.Cancelled}
		}
		return resp
	}
	if r.Seq < c.floor {
		return mResp{code: wire.Ambiguous}
	}
	resp, w := m.exec(r)
	if !resp.code.Retryable() {
		c.recs[r.Seq] = &mRecord{op: r.Op, resp: resp, w: w}
	}
	return resp
}

func (m *model) exec(r *wire.Request) (mResp, *mWaiter) {
	switch r.Op {
	case wire.OpAcquire:
		return m.acquire(r)
	case wire.OpRelease:
		return m.release(r), nil
	case wire.OpRenew:
		return m.renew(r), nil
	case wire.OpRevoke, wire.OpExpire:
		return m.endLease(r.Lease), nil
	case wire.OpCancel:
		return m.cancel(r), nil
	}
	return mResp{code: wire.UnknownOp}, nil
}

func (m *model) ttlOK(ttl int64) bool { return ttl >= m.cfg.MinTTL && ttl <= m.cfg.MaxTTL }

// acquire is acquireOn with the rule that a refused request leaves no
// session lease behind: one it created is taken back.
func (m *model) acquire(r *wire.Request) (mResp, *mWaiter) {
	existed := m.leases[r.Lease]
	resp, w := m.acquireOn(r)
	if !existed && r.Lease != 0 && resp.code != wire.OK && resp.code != wire.Queued {
		delete(m.leases, r.Lease)
	}
	return resp, w
}

func (m *model) acquireOn(r *wire.Request) (mResp, *mWaiter) {
	if r.Mode != wire.Exclusive && r.Mode != wire.Shared {
		return mResp{code: wire.InvalidArgument}, nil
	}
	switch {
	case r.Lease == 0:
		if !m.ttlOK(r.TTL) {
			return mResp{code: wire.InvalidArgument}, nil
		}
	case r.Lease&SingleLeaseBit != 0:
		return mResp{code: wire.InvalidArgument}, nil
	case m.leases[r.Lease]:
		if r.TTL != 0 && !m.ttlOK(r.TTL) {
			return mResp{code: wire.InvalidArgument}, nil
		}
	case m.tombs[r.Lease] != 0 || m.isTomb(r.Lease):
		return mResp{code: wire.SessionExpired}, nil
	case !m.ttlOK(r.TTL):
		return mResp{code: wire.InvalidArgument}, nil
	default:
		m.leases[r.Lease] = true
	}
	if own := m.own(r); own != nil {
		return m.reenter(own, r.Mode), nil
	}
	var conflicting []*mHolder
	for _, h := range m.holders {
		if related(h.path, r.Path) && conflicts(h.mode, r.Mode) {
			conflicting = append(conflicting, h)
		}
	}
	if len(conflicting) > 0 && r.Lease != 0 && !slices.ContainsFunc(conflicting, func(h *mHolder) bool {
		return h.lease != r.Lease || h.owner != r.Owner
	}) {
		return mResp{code: wire.SelfConflict}, nil
	}
	queuedConflict := slices.ContainsFunc(m.waiters, func(w *mWaiter) bool {
		return related(w.path, r.Path) && conflicts(w.mode, r.Mode)
	})
	if len(conflicting) > 0 || queuedConflict {
		if r.Wait == wire.WaitNone {
			return mResp{code: wire.Conflict}, nil
		}
		if r.Lease != 0 && m.cycle(r.Path, r.Mode, r.Lease, r.Owner) {
			return mResp{code: wire.Deadlock}, nil
		}
		m.arrivals++
		w := &mWaiter{path: r.Path, mode: r.Mode, lease: r.Lease, owner: r.Owner, client: r.Client, seq: r.Seq,
			arrival: m.arrivals}
		m.waiters = append(m.waiters, w)
		return mResp{code: wire.Queued, lease: r.Lease}, w
	}
	h := m.grant(r.Path, r.Mode, r.Lease, r.Owner)
	return mResp{code: wire.OK, token: h.token, lease: h.lease, count: 1}, nil
}

func (m *model) isTomb(id uint64) bool { _, ok := m.tombs[id]; return ok }

func (m *model) own(r *wire.Request) *mHolder {
	var best *mHolder
	for _, h := range m.holders {
		if r.Lease != 0 && h.path == r.Path && h.lease == r.Lease && h.owner == r.Owner &&
			(best == nil || h.token < best.token) {
			best = h
		}
	}
	return best
}

func (m *model) reenter(h *mHolder, mode wire.Mode) mResp {
	if h.mode == wire.Exclusive || mode == wire.Shared {
		h.count++
		return mResp{code: wire.OK, token: h.token, lease: h.lease, count: h.count}
	}
	for _, o := range m.holders {
		if o != h && related(o.path, h.path) {
			return mResp{code: wire.UpgradeConflict}
		}
	}
	m.fence++
	h.mode, h.token = wire.Exclusive, m.fence
	h.count++
	return mResp{code: wire.OK, token: h.token, lease: h.lease, count: h.count}
}

func (m *model) grant(path string, mode wire.Mode, lease uint64, owner string) *mHolder {
	m.fence++
	if lease == 0 {
		lease = SingleLeaseBit | m.fence
		m.singles[lease] = true
	}
	h := &mHolder{path: path, mode: mode, lease: lease, owner: owner, token: m.fence, count: 1}
	m.holders = append(m.holders, h)
	return h
}

func (m *model) holderByToken(path string, token uint64) *mHolder {
	for _, h := range m.holders {
		if h.path == path && h.token == token && token != 0 {
			return h
		}
	}
	return nil
}

func (m *model) tokenErr(token uint64) mResp {
	if token != 0 && token <= m.fence {
		return mResp{code: wire.StaleToken}
	}
	return mResp{code: wire.NotHolder}
}

func (m *model) release(r *wire.Request) mResp {
	h := m.holderByToken(r.Path, r.Token)
	if h == nil {
		return m.tokenErr(r.Token)
	}
	if h.count > 1 {
		h.count--
		return mResp{code: wire.OK, token: h.token, lease: h.lease, count: h.count}
	}
	m.dropHolder(h)
	return mResp{code: wire.OK, token: h.token, lease: h.lease, grants: m.handoff()}
}

func (m *model) dropHolder(h *mHolder) {
	m.holders = slices.DeleteFunc(m.holders, func(x *mHolder) bool { return x == h })
	delete(m.singles, h.lease)
}

func (m *model) renew(r *wire.Request) mResp {
	h := m.holderByToken(r.Path, r.Token)
	switch {
	case h == nil:
		return m.tokenErr(r.Token)
	case h.lease&SingleLeaseBit == 0, !m.ttlOK(r.TTL):
		return mResp{code: wire.InvalidArgument}
	}
	return mResp{code: wire.OK, token: h.token, lease: h.lease, count: h.count}
}

func (m *model) endLease(id uint64) mResp {
	if id == 0 {
		return mResp{code: wire.InvalidArgument}
	}
	if !m.leases[id] && !m.singles[id] {
		return mResp{code: wire.OK, lease: id}
	}
	for _, w := range slices.Clone(m.waiters) {
		if w.lease == id {
			m.dropWaiter(w, wire.SessionExpired)
		}
	}
	for _, h := range slices.Clone(m.holders) {
		if h.lease == id {
			m.dropHolder(h)
		}
	}
	delete(m.leases, id)
	m.tombs[id] = m.now
	return mResp{code: wire.OK, lease: id, grants: m.handoff()}
}

func (m *model) dropWaiter(w *mWaiter, code wire.Code) {
	m.waiters = slices.DeleteFunc(m.waiters, func(x *mWaiter) bool { return x == w })
	m.resolve(w, mResp{code: code})
}

func (m *model) resolve(w *mWaiter, resp mResp) {
	c := m.clients[w.client]
	if w.client == 0 || c == nil {
		return
	}
	if rec := c.recs[w.seq]; rec != nil && rec.w == w {
		rec.w, rec.resp = nil, resp
		rec.lingering = w.seq < c.floor
		c.lastSeen = m.now // the outcome is kept for ClientIdleMs at least
	}
}

func (m *model) cancel(r *wire.Request) mResp {
	var rec *mRecord
	if c := m.clients[r.Client]; c != nil {
		rec = c.recs[r.Seq]
	}
	if rec == nil || rec.op != wire.OpAcquire {
		return mResp{code: wire.NotFound}
	}
	if rec.w != nil {
		m.dropWaiter(rec.w, wire.Cancelled)
		return mResp{code: wire.OK, grants: m.handoff()}
	}
	if rec.resp.code == wire.OK && rec.resp.token != 0 {
		return mResp{code: wire.OK, token: rec.resp.token, lease: rec.resp.lease}
	}
	return mResp{code: wire.OK}
}

// handoff grants, in arrival order, every waiter that conflicts neither with
// a holder nor with an earlier waiter that is still queued.
func (m *model) handoff() []wire.Grant {
	var grants []wire.Grant
	var still []*mWaiter
	for _, w := range m.waiters {
		blocked := slices.ContainsFunc(m.holders, func(h *mHolder) bool {
			return related(h.path, w.path) && conflicts(h.mode, w.mode)
		}) || slices.ContainsFunc(still, func(e *mWaiter) bool {
			return related(e.path, w.path) && conflicts(e.mode, w.mode)
		})
		if blocked {
			still = append(still, w)
			continue
		}
		h := m.grant(w.path, w.mode, w.lease, w.owner)
		grants = append(grants, wire.Grant{Client: w.client, Seq: w.seq, Path: w.path, Token: h.token,
			Lease: h.lease, Mode: w.mode})
		m.resolve(w, mResp{code: wire.OK, token: h.token, lease: h.lease, count: 1})
	}
	m.waiters = still
	return grants
}

type mOwner struct {
	lease uint64
	owner string
}

// cycle: would a waiter of (lease, owner) for path reach its own owner by
// following "waits for a conflicting session holder" edges? Its own holds
// are not edges from the new waiter.
func (m *model) cycle(path string, mode wire.Mode, lease uint64, owner string) bool {
	me := mOwner{lease, owner}
	blockers := func(p string, md wire.Mode) []mOwner {
		var out []mOwner
		for _, h := range m.holders {
			if h.lease&SingleLeaseBit == 0 && related(h.path, p) && conflicts(h.mode, md) {
				out = append(out, mOwner{h.lease, h.owner})
			}
		}
		return out
	}
	seen := map[mOwner]bool{me: true}
	var stack []mOwner
	for _, o := range blockers(path, mode) {
		if o != me {
			stack = append(stack, o)
		}
	}
	for len(stack) > 0 {
		o := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[o] {
			if o == me {
				return true
			}
			continue
		}
		seen[o] = true
		for _, w := range m.waiters {
			if w.lease == o.lease && w.owner == o.owner {
				for _, b := range blockers(w.path, w.mode) {
					if b == me {
						return true
					}
					stack = append(stack, b)
				}
			}
		}
	}
	return false
}
