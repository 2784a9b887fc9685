package admin

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"sync"

	"github.com/lni/dragonboat/v4"
	"github.com/valyala/fasthttp"

	"github.com/wardenlock/warden/control"
	"github.com/wardenlock/warden/router"
	"github.com/wardenlock/warden/statemachine"
	"github.com/wardenlock/warden/wire"
)

// Status is what /v1/status answers: this node's view of the cluster.
type Status struct {
	Node     uint64        `json:"node"`
	Version  string        `json:"version"`          // this node's build (warden version)
	Commit   string        `json:"commit,omitempty"` // its commit, when known
	TableGen uint64        `json:"table_gen"`
	Conns    int           `json:"connections"`
	Nodes    []NodeInfo    `json:"nodes"`
	Shards   []ShardInfo   `json:"shards"`
	Ranges   []RangeInfo   `json:"ranges"`
	Checks   []CheckResult `json:"checks"`
	// ShardDecisions are the last recorded shard lifecycle decisions
	// (create, activate, retire, stop) with their reasons, oldest first.
	ShardDecisions []DecisionInfo `json:"shard_decisions"`
	// ShardPolicy is the automatic shard policy's last reading and
	// verdict, on the meta leader (absent elsewhere).
	ShardPolicy *control.PolicyState `json:"shard_policy,omitempty"`
	// LogStore is the node's Raft log store (the wal store only).
	LogStore *LogStoreInfo `json:"log_store,omitempty"`
	// AdminConnsRefused: connections to this admin port reset by its
	// per-address and total limits since the node started.
	AdminConnsRefused int64 `json:"admin_conns_refused"`
}

// LogStoreInfo: the Raft log store's segment syncs and rotations. A
// rotation holds every writer of the node while it starts a segment, so
// its longest duration is the longest pause the store caused.
type LogStoreInfo struct {
	Syncs             uint64  `json:"syncs"`
	SyncSeconds       float64 `json:"sync_seconds"`
	Rotations         uint64  `json:"rotations"`
	RotationSeconds   float64 `json:"rotation_seconds"`
	RotationMaxMillis float64 `json:"rotation_max_ms"`
	CopiedBytes       uint64  `json:"rotation_copied_bytes"`
	CopiedReplicas    uint64  `json:"rotation_copied_replicas"`
}

// NodeInfo is one member of the cluster, and whether this node hears from
// it: up, down (its client port refuses connections), unreachable (no
// answer) or unknown (not asked yet), with the time of its last answer
// (router.Liveness).
type NodeInfo struct {
	ID         uint64 `json:"id"`
	ClientAddr string `json:"client_addr"`
	RaftAddr   string `json:"raft_addr"`
	AdminAddr  string `json:"admin_addr,omitempty"`
	Self       bool   `json:"self"`
	router.Liveness
}

// ShardInfo is one data shard as this node sees it; the counts are read from
// the local replica (which may trail the leader by a few entries).
type ShardInfo struct {
	ID       uint64   `json:"id"`
	State    string   `json:"state"` // creating, active, retiring
	Leader   uint64   `json:"leader"`
	Term     uint64   `json:"term"`
	Replicas []uint64 `json:"replicas"`
	Local    bool     `json:"local"`
	IsLeader bool     `json:"is_leader"`
	Applied  uint64   `json:"applied"`
	LogIndex uint64   `json:"log_index"` // last entry in the local Raft log
	Ranges   int      `json:"ranges"`
	Locks    int      `json:"locks"`
	Waiters  int      `json:"waiters"`
	Leases   int      `json:"leases"`
	Keys     int      `json:"keys"`
	Fence    uint64   `json:"fence"`
	Watchers int      `json:"watchers"`
}

// RangeInfo is one range of the hashed key space. Its bounds are route keys
// (the 64-bit hash of a namespace, wire.RouteKey) in 16 hex digits, the form
// `warden ranges` shows and `warden range split/merge/move` take; "" is the
// start or the end of the key space. Share is the fraction of the key space
// the range covers: namespaces hash evenly over it.
type RangeInfo struct {
	Start string  `json:"start"`
	End   string  `json:"end"`
	Share float64 `json:"share"`
	Shard uint64  `json:"shard"`
	Gen   uint64  `json:"gen"`
}

// CheckResult is one readiness check.
type CheckResult struct {
	Name  string `json:"name"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

func (s *Server) status() Status {
	rs := s.cfg.Router.Status()
	st := Status{Node: rs.Node, Version: rs.Version, Commit: rs.Commit, TableGen: rs.TableGen, Conns: rs.Conns,
		AdminConnsRefused: s.ConnsRefused()}
	t := s.cfg.Host.Table()
	if t != nil {
		live := s.cfg.Router.NodeLiveness()
		for _, n := range t.Nodes {
			l, ok := live[n.ID]
			if !ok {
				l.State = router.NodeUnknown
			}
			st.Nodes = append(st.Nodes, NodeInfo{ID: n.ID, ClientAddr: n.ClientAddr, RaftAddr: n.RaftAddr,
				AdminAddr: n.AdminAddr, Self: n.ID == rs.Node, Liveness: l})
		}
		slices.SortFunc(st.Nodes, func(a, b NodeInfo) int { return cmp64(a.ID, b.ID) })
		st.ShardDecisions = decisionsOf(t)
		st.ShardPolicy = s.cfg.Host.PolicyState()
		for _, r := range t.Ranges {
			st.Ranges = append(st.Ranges, RangeInfo{Start: wire.RouteKeyHex(r.Start), End: wire.RouteKeyHex(r.End),
				Share: wire.RangeShare(r.Start, r.End), Shard: r.Shard, Gen: r.Gen})
		}
	}
	nh := s.cfg.Host.NodeHost()
	terms := map[uint64]uint64{}
	for _, si := range nh.GetNodeHostInfo(dragonboat.NodeHostInfoOption{SkipLogInfo: true}).ShardInfoList {
		terms[si.ShardID] = si.Term
	}
	for _, ss := range rs.Shards {
		si := ShardInfo{ID: ss.ID, State: ss.State, Leader: ss.Leader, Term: terms[ss.ID], Replicas: ss.Replicas, Local: ss.Local,
			IsLeader: ss.IsLeader, Ranges: ss.Ranges, Watchers: max(ss.Watchers-1, 0)} // minus the metrics feed
		if ss.Local {
			if v, err := nh.StaleRead(ss.ID, statemachine.StatsQuery{}); err == nil {
				x := v.(statemachine.Stats)
				si.Applied, si.Locks, si.Waiters, si.Leases, si.Keys, si.Fence = x.Applied, x.Locks, x.Waiters, x.Leases, x.KVs, x.Fence
			}
			if lr, err := nh.GetLogReader(ss.ID); err == nil {
				_, si.LogIndex = lr.GetRange()
			}
		}
		st.Shards = append(st.Shards, si)
	}
	if ws := s.cfg.Host.WALStats(); ws != nil {
		syncs, syncSec, _ := ws.Snapshot()
		r := ws.Rotations()
		st.LogStore = &LogStoreInfo{Syncs: syncs, SyncSeconds: syncSec, Rotations: r.Count, RotationSeconds: r.Seconds,
			RotationMaxMillis: r.MaxSeconds * 1e3, CopiedBytes: r.CopiedBytes, CopiedReplicas: r.CopiedReplicas}
	}
	for _, c := range s.checks {
		cr := CheckResult{Name: c.name, OK: true}
		if err := c.run(); err != nil {
			cr.OK, cr.Error = false, err.Error()
		}
		st.Checks = append(st.Checks, cr)
	}
	return st
}

// Lock is one held lock grant with its queue, as /v1/locks lists it.
type Lock struct {
	Path    string     `json:"path"`
	Mode    string     `json:"mode"`
	Owner   string     `json:"owner,omitempty"`
	Lease   wire.HexID `json:"lease"`
	Token   uint64     `json:"token"`
	Holds   uint32     `json:"holds"`
	TTLMs   int64      `json:"ttl_ms"` // time left on the lease; 0 when the answering replica does not know it
	Waiters []Waiter   `json:"waiters"`
}

// Waiter is one queued request, in queue order.
type Waiter struct {
	Owner string     `json:"owner,omitempty"`
	Lease wire.HexID `json:"lease"`
	Mode  string     `json:"mode"`
	Path  string     `json:"path"`
}

const (
	defaultLimit = 100
	maxLimit     = 1000
	fanout       = 8 // LockInfo calls in flight per listing
)

// locks lists the locks held under prefix (through the router, as a client
// would see them) and each one's waiters.
func (s *Server) locks(ctx context.Context, prefix string, limit int) ([]Lock, error) {
	resp, err := s.cfg.Router.Query(ctx, &wire.Request{Op: wire.OpListLocks, Path: prefix, Limit: uint32(limit), Flags: wire.FlagPrefix})
	if err != nil {
		return nil, err
	}
	out := make([]Lock, len(resp.Holders))
	var paths []string
	index := map[string]int{}
	for i, h := range resp.Holders {
		out[i] = Lock{Path: h.Path, Mode: h.Mode.String(), Owner: h.Owner, Lease: wire.HexID(h.Lease), Token: h.Token, Holds: h.Count, TTLMs: h.TTL}
		if _, ok := index[h.Path]; !ok {
			index[h.Path] = len(paths)
			paths = append(paths, h.Path)
		}
	}
	waiters := make([][]Waiter, len(paths))
	var wg sync.WaitGroup
	sem := make(chan struct{}, fanout)
	for i, p := range paths {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			r, err := s.cfg.Router.Query(ctx, &wire.Request{Op: wire.OpLockInfo, Path: p})
			if err != nil {
				return
			}
			for _, w := range r.Waiters {
				waiters[i] = append(waiters[i], Waiter{Owner: w.Owner, Lease: wire.HexID(w.Lease), Mode: w.Mode.String(), Path: w.Path})
			}
		}()
	}
	wg.Wait()
	for i := range out {
		out[i].Waiters = waiters[index[out[i].Path]]
		if out[i].Waiters == nil {
			out[i].Waiters = []Waiter{}
		}
	}
	return out, nil
}

// Session is one live lease and the shards it lives on.
type Session struct {
	ID     wire.HexID `json:"id"`
	TTLMs  int64      `json:"ttl_ms"`
	Single bool       `json:"single_lock"` // made by a session-less acquire
	Shards []uint64   `json:"shards"`
}

// sessions lists live leases, read linearizably from every local replica.
func (s *Server) sessions(ctx context.Context, limit int) ([]Session, error) {
	byID := map[uint64]*Session{}
	for _, id := range s.cfg.Host.ShardIDs() {
		v, err := s.cfg.Host.NodeHost().SyncRead(ctx, id, statemachine.LeasesQuery{})
		if err != nil {
			return nil, err
		}
		infos, _ := v.([]statemachine.LeaseInfo)
		for _, li := range infos {
			se := byID[li.ID]
			if se == nil {
				se = &Session{ID: wire.HexID(li.ID), TTLMs: li.TTL, Single: li.ID&statemachine.SingleLeaseBit != 0}
				byID[li.ID] = se
			}
			se.Shards = append(se.Shards, id)
		}
	}
	out := make([]Session, 0, len(byID))
	for _, se := range byID {
		out = append(out, *se)
	}
	slices.SortFunc(out, func(a, b Session) int { return cmp64(uint64(a.ID), uint64(b.ID)) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func cmp64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Election is one election's current leader.
type Election struct {
	Path  string     `json:"path"`
	Value string     `json:"value"`
	Owner string     `json:"owner,omitempty"`
	Lease wire.HexID `json:"lease"`
	Token uint64     `json:"token"`
}

// elections lists the elections under prefix that have a leader: held
// paths whose leader record carries a campaign value.
func (s *Server) elections(ctx context.Context, prefix string, limit int) ([]Election, error) {
	held, err := s.locks(ctx, prefix, limit)
	if err != nil {
		return nil, err
	}
	out := []Election{}
	seen := map[string]bool{}
	for _, l := range held {
		if seen[l.Path] {
			continue
		}
		seen[l.Path] = true
		r, err := s.cfg.Router.Query(ctx, &wire.Request{Op: wire.OpLeader, Path: l.Path})
		if err != nil || r.Value == nil {
			continue
		}
		out = append(out, Election{Path: l.Path, Value: string(r.Value), Owner: r.Owner, Lease: wire.HexID(r.Lease), Token: r.Token})
	}
	return out, nil
}

func queryLimit(ctx *fasthttp.RequestCtx) int {
	n, err := strconv.Atoi(string(ctx.QueryArgs().Peek("limit")))
	if err != nil || n <= 0 {
		return defaultLimit
	}
	return min(n, maxLimit)
}

func queryPrefix(ctx *fasthttp.RequestCtx) string {
	p := string(ctx.QueryArgs().Peek("prefix"))
	if p == "" {
		return "/"
	}
	return p
}

func writeJSON(ctx *fasthttp.RequestCtx, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		ctx.Error(err.Error(), fasthttp.StatusInternalServerError)
		return
	}
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetBody(append(b, '\n'))
}

// writeError answers a failed query: bad input is the caller's fault (400),
// anything else is the cluster's (503).
func writeError(ctx *fasthttp.RequestCtx, err error) {
	code := fasthttp.StatusServiceUnavailable
	if we, ok := err.(*wire.Error); ok && (we.Code == wire.InvalidArgument || we.Code == wire.SpansRanges) {
		code = fasthttp.StatusBadRequest
	}
	writeJSON(ctx, map[string]string{"error": err.Error()})
	ctx.SetStatusCode(code)
}

func (s *Server) apiStatus(ctx *fasthttp.RequestCtx) { writeJSON(ctx, s.status()) }

func (s *Server) apiLocks(ctx *fasthttp.RequestCtx) {
	qctx, cancel := s.queryCtx()
	defer cancel()
	locks, err := s.locks(qctx, queryPrefix(ctx), queryLimit(ctx))
	if err != nil {
		writeError(ctx, err)
		return
	}
	writeJSON(ctx, locks)
}

func (s *Server) apiSessions(ctx *fasthttp.RequestCtx) {
	qctx, cancel := s.queryCtx()
	defer cancel()
	ss, err := s.sessions(qctx, queryLimit(ctx))
	if err != nil {
		writeError(ctx, err)
		return
	}
	writeJSON(ctx, ss)
}

func (s *Server) apiElections(ctx *fasthttp.RequestCtx) {
	qctx, cancel := s.queryCtx()
	defer cancel()
	es, err := s.elections(qctx, queryPrefix(ctx), queryLimit(ctx))
	if err != nil {
		writeError(ctx, err)
		return
	}
	writeJSON(ctx, es)
}
