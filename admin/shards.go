package admin

import "github.com/valyala/fasthttp"

// apiShards answers /v1/shards: every data shard across the cluster, with
// its replicas (node, replica id, role, applied index as each node reports
// it), its leader and any replica move under way (router.ShardView).
func (s *Server) apiShards(ctx *fasthttp.RequestCtx) {
	qctx, cancel := s.queryCtx()
	defer cancel()
	shards, err := s.cfg.Router.Shards(qctx)
	if err != nil {
		writeError(ctx, err)
		return
	}
	writeJSON(ctx, shards)
}
