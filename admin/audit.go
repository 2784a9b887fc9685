package admin

import (
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/wardenlock/warden/audit"
	"github.com/wardenlock/warden/wire"
)

// AuditAnswer is what /v1/audit answers.
type AuditAnswer struct {
	Node    uint64         `json:"node"`
	Records []audit.Record `json:"records"`
	Dropped uint64         `json:"dropped"` // events this node failed to record (queue full)
}

// apiAudit: GET /v1/audit?prefix=/locks/billing&since=<RFC 3339 or
// duration ago>&until=...&token=N&limit=N — this node's audit records of a
// path and everything under it, oldest first.
func (s *Server) apiAudit(ctx *fasthttp.RequestCtx) {
	if s.cfg.Audit == nil {
		writeJSON(ctx, map[string]string{"error": "this node keeps no audit trail"})
		ctx.SetStatusCode(fasthttp.StatusNotFound)
		return
	}
	args := ctx.QueryArgs()
	q := audit.Query{Prefix: queryPrefix(ctx), Limit: queryLimit(ctx)}
	now := time.Now()
	var err error
	if q.Since, err = ParseSince(string(args.Peek("since")), now); err != nil {
		writeError(ctx, wire.Errorf(wire.InvalidArgument, "since: %v", err))
		return
	}
	if q.Until, err = ParseSince(string(args.Peek("until")), now); err != nil {
		writeError(ctx, wire.Errorf(wire.InvalidArgument, "until: %v", err))
		return
	}
	if tok := args.Peek("token"); len(tok) > 0 {
		if q.Token, err = strconv.ParseUint(string(tok), 10, 64); err != nil {
			writeError(ctx, wire.Errorf(wire.InvalidArgument, "token: %v", err))
			return
		}
	}
	recs, err := s.cfg.Audit.Find(q)
	if err != nil {
		writeError(ctx, err)
		return
	}
	if recs == nil {
		recs = []audit.Record{}
	}
	writeJSON(ctx, AuditAnswer{Node: s.cfg.Host.NodeID(), Records: recs, Dropped: s.cfg.Audit.Dropped()})
}

// ParseSince reads a time as RFC 3339, unix milliseconds, or a duration
// before now ("90m"). Empty is the zero time.
func ParseSince(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		return now.Add(-d), nil
	}
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	return time.Parse(time.RFC3339Nano, v)
}
