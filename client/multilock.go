package client

import (
	"context"
	"errors"
	"slices"
	"sort"

	"github.com/wardenlock/warden/wire"
)

// MultiLock is a set of paths held together by one session owner, each with
// its own fencing token.
//
// LockAll takes the set all or nothing. The paths are ordered globally: by
// the start key of the range that serves them, then by path, and taken
// group by group in that order, where a group is the paths of one shard.
// Each group is first tried as one atomic AcquireMulti (one state machine
// command: either every path of the group is granted or none). If a group
// cannot be granted at once and the caller is willing to wait, its paths are
// taken one by one, in the same order, with ordinary FIFO waits. Every
// multi-locker therefore only ever waits for a path while holding paths that
// come earlier in the one global order, so multi-lockers never deadlock one
// another. If anything fails (ctx ends, a refusal), everything already taken
// is released before LockAll returns: the caller holds all of the paths or
// none of them.
type MultiLock struct {
	s     *Session
	owner string
	held  []heldPath // in the global order
	life  holdLife
}

type heldPath struct {
	path  string
	token uint64
}

// LockAll acquires every path (exclusive, or shared with WithShared) for
// session s; WithTry fails with ErrConflict instead of waiting. Paths must
// not overlap (one an ancestor of another).
func LockAll(ctx context.Context, s *Session, paths []string, opts ...LockOption) (*MultiLock, error) {
	if err := s.Err(); err != nil {
		return nil, err
	}
	cfg := lockConfigOf(opts)
	m := &MultiLock{s: s, owner: cfg.owner}
	groups, err := s.c.groupByShard(ctx, paths)
	if err != nil {
		return nil, err
	}
	m.life.start(s)
	for _, g := range groups {
		err := m.tryGroup(ctx, g, cfg)
		if err != nil && !cfg.try && waitable(err) {
			err = m.waitEach(ctx, g, cfg)
		}
		if err == nil {
			err = s.Err() // grants to a session ended by the client's clock are not reported
		}
		if err != nil {
			m.giveBack()
			return nil, err
		}
	}
	for _, h := range m.held {
		s.held.add(h.path, h.token, m)
	}
	return m, nil
}

// holdLost implements heldHold: the service ended one of the paths, so the
// set is no longer held as a whole.
func (m *MultiLock) holdLost(_ uint64, cause error) { m.life.end(cause) }

// Context returns a context that ends when the set stops being held as a
// whole: on Unlock, when the service ends one of its holds (the cause is
// then a *HoldLostError naming it), or when the session ends.
func (m *MultiLock) Context() context.Context { return m.life.context() }

// IsHeld reports whether every path is held, as far as the client knows.
func (m *MultiLock) IsHeld() bool { return m.life.held() }

// waitable: a group that could not be taken at once may still be taken by
// waiting (or, after a stale route, path by path).
func waitable(err error) bool {
	return errors.Is(err, ErrConflict) || errors.Is(err, ErrLockDelayed) || errors.Is(err, ErrSpansRanges)
}

func (m *MultiLock) tryGroup(ctx context.Context, paths []string, cfg lockConfig) error {
	c := m.s.c
	req := &wire.Request{Op: wire.OpAcquireMulti, Path: paths[0], Paths: paths, Mode: cfg.mode, Lease: m.s.lease,
		TTL: millis(m.s.ttl), Owner: m.owner, Client: c.id, Seq: c.seqs.begin()}
	cfg.apply(req)
	wd := newWithdrawal(c, req, releaser{c, m.s.lease, m.owner})
	defer wd.release()
	resp, err := c.call(ctx, req, c.cfg.requestTimeout)
	if errors.Is(err, ErrAmbiguous) {
		return wd.run(givenUp(ctx, err)) // the group may have been granted: learn its fate, give it back
	}
	if err != nil {
		return err
	}
	for _, h := range resp.Holders {
		m.held = append(m.held, heldPath{h.Path, h.Token})
	}
	return nil
}

func (m *MultiLock) waitEach(ctx context.Context, paths []string, cfg lockConfig) error {
	c := m.s.c
	for _, p := range paths {
		req := &wire.Request{Op: wire.OpAcquire, Path: p, Mode: cfg.mode, Lease: m.s.lease, TTL: millis(m.s.ttl),
			Wait: waitFor(ctx, false), Owner: m.owner}
		cfg.apply(req)
		resp, err := c.park(ctx, m.s, req, nil, releaser{c, m.s.lease, m.owner})
		if err != nil {
			return err
		}
		m.held = append(m.held, heldPath{p, resp.Token})
	}
	return nil
}

// giveBack releases what a failed LockAll took, in reverse order.
func (m *MultiLock) giveBack() {
	ctx, cancel := m.s.c.undoContext()
	defer cancel()
	_ = m.Unlock(ctx)
}

// Tokens returns each path's fencing token.
func (m *MultiLock) Tokens() map[string]uint64 {
	out := make(map[string]uint64, len(m.held))
	for _, h := range m.held {
		out[h.path] = h.token
	}
	return out
}

// Paths returns the held paths in the global order they were taken in.
func (m *MultiLock) Paths() []string {
	out := make([]string, len(m.held))
	for i, h := range m.held {
		out[i] = h.path
	}
	return out
}

// Unlock releases every path, in reverse order. Paths whose release is
// confirmed (or whose hold has already ended) are forgotten; the first
// other error is returned and Unlock may be called again.
func (m *MultiLock) Unlock(ctx context.Context) error {
	var first error
	keep := m.held[:0]
	for i := len(m.held) - 1; i >= 0; i-- {
		h := m.held[i]
		err := m.s.c.release(ctx, h.path, h.token, m.s.lease, m.owner)
		if err != nil && !errors.Is(err, ErrNotHolder) && !errors.Is(err, ErrStaleToken) && !errors.Is(err, ErrSessionExpired) {
			keep = append(keep, h)
			if first == nil {
				first = err
			}
			continue
		}
		m.s.held.remove(h.path, h.token, m)
	}
	slices.Reverse(keep)
	m.held = keep
	if len(keep) == 0 {
		m.life.end(ErrReleased)
	}
	return first
}

// groupByShard orders paths globally (range start key, then path) and cuts
// them into one group per shard. Without a route table (a single range)
// everything is one group.
func (c *Client) groupByShard(ctx context.Context, paths []string) ([][]string, error) {
	if len(paths) == 0 {
		return nil, wire.Errorf(wire.InvalidArgument, "no paths")
	}
	t, err := c.routeTable(ctx)
	if err != nil {
		return nil, err
	}
	return orderPaths(t, paths)
}

// orderPaths is groupByShard's pure part.
func orderPaths(t *wire.RouteTable, paths []string) ([][]string, error) {
	type keyed struct {
		start string
		shard uint64
		path  string
	}
	ks := make([]keyed, 0, len(paths))
	for _, p := range paths {
		k := keyed{path: p}
		if t != nil {
			r, ok := rangeOf(t, p)
			if !ok {
				return nil, wire.Errorf(wire.SpansRanges, "%s spans several ranges", p)
			}
			k.start, k.shard = r.Start, r.Shard
		}
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		if ks[i].start != ks[j].start {
			return ks[i].start < ks[j].start
		}
		return ks[i].path < ks[j].path
	})
	var groups [][]string
	for i, k := range ks {
		if i > 0 && k.path == ks[i-1].path {
			continue
		}
		if i == 0 || k.shard != ks[i-1].shard {
			groups = append(groups, nil)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], k.path)
	}
	return groups, nil
}

// rangeOf returns the range serving path.
func rangeOf(t *wire.RouteTable, path string) (wire.Range, bool) {
	shard, ok := t.Locate(path)
	if !ok {
		return wire.Range{}, false
	}
	start, _ := wire.Span(path, t.Depth)
	for _, r := range t.Ranges {
		if r.Shard == shard && r.Start <= start && (r.End == "" || start < r.End) {
			return r, true
		}
	}
	return wire.Range{}, false
}

// routeTable returns the direct router's table, or fetches one.
func (c *Client) routeTable(ctx context.Context) (*wire.RouteTable, error) {
	if c.direct != nil {
		if t := c.direct.table.Load(); t != nil {
			return t, nil
		}
	}
	resp, err := c.call(ctx, &wire.Request{Op: wire.OpRanges}, c.cfg.requestTimeout)
	if err != nil {
		return nil, err
	}
	return resp.Table, nil
}
