package admin

import (
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/wardenlock/warden/backup"
	"github.com/wardenlock/warden/wire"
)

// The backup endpoints serve what `warden snapshot save` writes: the range
// table (msgpack) and each data shard's dump (its bytes, with statistics in
// a header). Both are linearizable reads. They expose all state: keep the
// admin port reachable by operators only (see docs/operations.md).

func (s *Server) apiBackupTable(ctx *fasthttp.RequestCtx) {
	qctx, cancel := s.queryCtx()
	defer cancel()
	t, err := s.cfg.Host.RefreshTable(qctx)
	if err != nil {
		writeError(ctx, err)
		return
	}
	if t == nil {
		writeError(ctx, wire.Errorf(wire.Unavailable, "no range table yet"))
		return
	}
	b, err := msgpack.Marshal(t)
	if err != nil {
		writeError(ctx, err)
		return
	}
	ctx.SetContentType("application/msgpack")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetBody(b)
}

func (s *Server) apiBackupShard(ctx *fasthttp.RequestCtx, path string) {
	id, err := strconv.ParseUint(strings.TrimPrefix(path, "/v1/backup/shards/"), 10, 64)
	if err != nil {
		writeError(ctx, wire.Errorf(wire.InvalidArgument, "bad shard id"))
		return
	}
	if _, ok := s.cfg.Host.Shard(id); !ok {
		writeJSON(ctx, map[string]string{"error": "no local replica of shard " + strconv.FormatUint(id, 10)})
		ctx.SetStatusCode(fasthttp.StatusNotFound)
		return
	}
	qctx, cancel := s.queryCtx()
	defer cancel()
	d, err := s.cfg.Host.Dump(qctx, id)
	if err != nil {
		writeError(ctx, err)
		return
	}
	h, err := backup.EncodeStats(d.Stats)
	if err != nil {
		writeError(ctx, err)
		return
	}
	ctx.SetContentType("application/octet-stream")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.Response.Header.Set(backup.StatsHeader, h)
	ctx.SetBody(d.State)
}
