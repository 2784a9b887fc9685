package router

import (
	"sort"
	"time"

	"github.com/wardenlock/warden/hierarchy"
	"github.com/wardenlock/warden/wire"
)

// spansShards reports whether a prefix is shallower than the namespace
// depth, so its subtree is spread over every shard.
func (s *Server) spansShards(path string) bool {
	t := s.cache.table()
	return t != nil && len(t.Serving()) > 1 && hierarchy.Depth(path) < t.NamespaceDepth
}

// broadcast sends req to every data shard and merges the answers: lists
// are concatenated in path order; the first error wins.
func (s *Server) broadcast(req *wire.Request, done func(*wire.Response)) {
	t := s.cache.table()
	if t == nil {
		done(&wire.Response{ID: req.ID, Code: wire.Unavailable, Msg: "range table not loaded yet"})
		return
	}
	serving := t.Serving() // a shard being created holds nothing yet
	if len(serving) == 0 {
		done(&wire.Response{ID: req.ID, Code: wire.Unavailable, Msg: "no data shard serves yet"})
		return
	}
	agg := &fanIn{n: len(serving), out: &wire.Response{ID: req.ID}, done: func(r *wire.Response) {
		sort.Slice(r.Holders, func(i, j int) bool { return r.Holders[i].Path < r.Holders[j].Path })
		sort.Slice(r.KVs, func(i, j int) bool { return r.KVs[i].Key < r.KVs[j].Key })
		if req.Limit > 0 && len(r.Holders) > int(req.Limit) {
			r.Holders = r.Holders[:req.Limit]
		}
		if req.Limit > 0 && len(r.KVs) > int(req.Limit) {
			r.KVs = r.KVs[:req.Limit]
		}
		done(r)
	}}
	deadline := time.Now().Add(s.budget(req))
	for _, si := range serving {
		sub := *req
		sub.Shard = si.ID
		s.routeUntil(&sub, deadline, s.goneTolerant(si.ID, agg.add))
	}
}

// abandon withdraws a wait whose client connection closed. If the grant won
// the race, the lock is released at once.
func (s *Server) abandon(k clientSeq, pw parkedWait) {
	req := &wire.Request{Op: wire.OpCancel, Path: pw.path, Client: k.client, Seq: k.seq}
	s.route(req, func(r *wire.Response) {
		if r.Code == wire.OK && r.Token != 0 {
			s.releaseOrphan(&wire.Request{Op: wire.OpAcquire, Path: pw.path}, r)
		}
	})
}

// releaseOrphan releases a lock granted to a client that is gone.
func (s *Server) releaseOrphan(req *wire.Request, grant *wire.Response) {
	rel := &wire.Request{Op: wire.OpRelease, Path: req.Path, Token: grant.Token, Lease: grant.Lease,
		Client: randomID(), Seq: 1}
	if req.Op == wire.OpCampaign {
		rel.Op = wire.OpResign
	}
	s.route(rel, func(r *wire.Response) {
		if r.Code != wire.OK && r.Code != wire.NotHolder && r.Code != wire.StaleToken {
			s.log.Warn("could not release a lock granted to a departed client",
				"path", req.Path, "token", grant.Token, "code", r.Code)
		}
	})
}
