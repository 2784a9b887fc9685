package router

import (
	"context"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/wardenlock/warden/auth"
	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/wire"
)

// RangeRow is one line of OpRangeList (Response.Value, msgpack).
type RangeRow struct {
	Start  string `msgpack:"start"`
	End    string `msgpack:"end"`
	Shard  uint64 `msgpack:"shard"`
	Gen    uint64 `msgpack:"gen"`
	Ops    uint64 `msgpack:"ops"`              // ops applied on the local replica of its shard since it started
	Moving string `msgpack:"moving,omitempty"` // "move 3 → shard 4: frozen", when a move is in flight
}

func isRangeAdmin(op wire.Op) bool {
	switch op {
	case wire.OpRangeSplit, wire.OpRangeMerge, wire.OpRangeMove, wire.OpRangeList:
		return true
	}
	return false
}

// rangeAdmin answers the range administration ops. Changes need the admin
// permission on "/" and are audited.
func (c *conn) rangeAdmin(req *wire.Request, done func(*wire.Response)) {
	h := c.s.cfg.Host
	if h == nil {
		done(&wire.Response{Code: wire.InvalidArgument, Msg: "a standalone router holds no table: send range commands to a node"})
		return
	}
	if req.Op == wire.OpRangeList {
		go func() {
			// The meta group's current table, not this node's cached copy.
			ctx, cancel := context.WithTimeout(context.Background(), c.s.cfg.RequestTimeout)
			_, err := h.RefreshTable(ctx)
			cancel()
			if err != nil {
				done(&wire.Response{Code: wire.Unavailable, Msg: "cannot read the range table: " + err.Error()})
				return
			}
			b, err := msgpack.Marshal(c.s.RangeRows())
			if err != nil {
				done(&wire.Response{Code: wire.Internal, Msg: err.Error()})
				return
			}
			done(&wire.Response{Value: b})
		}()
		return
	}
	if pol := c.s.policy(); pol != nil && !pol.Allowed(c.sec.identity, auth.Admin, "/") {
		done(&wire.Response{Code: wire.Unauthorized, Msg: "range changes need the admin permission on /"})
		return
	}
	cmd, err := c.s.rangeCommand(req)
	if err != nil {
		done(errorResponse(req.ID, err))
		return
	}
	c.s.cfg.Security.Audit.Info("admin: range change", "identity", c.sec.identity, "op", cmd.Op, "key", cmd.Key, "shard", cmd.Shard)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.s.cfg.RequestTimeout)
		defer cancel()
		id, err := h.RangeCommand(ctx, cmd)
		if err != nil {
			done(errorResponse(req.ID, err))
			return
		}
		done(&wire.Response{Token: id})
	}()
}

// rangeCommand turns a request into a meta command: a split names a
// namespace path (the new range starts at its key) or a raw 8-byte key in
// Value; merge and move name a range by its start key in Value.
func (s *Server) rangeCommand(req *wire.Request) (placement.RangeCommand, error) {
	t := s.cache.table()
	if t == nil {
		return placement.RangeCommand{}, wire.Errorf(wire.Unavailable, "range table not loaded yet")
	}
	key := string(req.Value)
	switch req.Op {
	case wire.OpRangeSplit:
		if req.Path != "" {
			if wire.PathDepth(req.Path) < t.NamespaceDepth {
				return placement.RangeCommand{}, wire.Errorf(wire.InvalidArgument,
					"%s is shallower than the namespace depth %d: ranges are cut only between namespaces", req.Path, t.NamespaceDepth)
			}
			key = wire.RouteKey(wire.Namespace(req.Path, t.NamespaceDepth))
		}
		if len(key) != 8 {
			return placement.RangeCommand{}, wire.Errorf(wire.InvalidArgument, "a split needs a namespace path or an 8-byte key")
		}
		return placement.RangeCommand{Op: "split", Key: key}, nil
	case wire.OpRangeMerge:
		return placement.RangeCommand{Op: "merge", Key: key}, nil
	default:
		return placement.RangeCommand{Op: "move", Key: key, Shard: req.Shard}, nil
	}
}

// RangeRows lists the table's ranges with their load as the local replicas
// count it.
func (s *Server) RangeRows() []RangeRow {
	t := s.cache.table()
	if t == nil {
		return nil
	}
	ops := map[string]uint64{}
	if h := s.cfg.Host; h != nil {
		for _, id := range h.ShardIDs() {
			ranges, counts, err := h.RangeLoad(id)
			if err != nil {
				continue
			}
			for i, r := range ranges {
				if i < len(counts) && r.Shard == id {
					ops[rowKey(r.Start, r.Shard)] = counts[i]
				}
			}
		}
	}
	rows := make([]RangeRow, 0, len(t.Ranges))
	for _, r := range t.Ranges {
		row := RangeRow{Start: r.Start, End: r.End, Shard: r.Shard, Gen: r.Gen, Ops: ops[rowKey(r.Start, r.Shard)]}
		for _, mv := range t.RangeMoves {
			if mv.Start == r.Start {
				row.Moving = moveText(mv)
			}
		}
		rows = append(rows, row)
	}
	return rows
}

func rowKey(start string, shard uint64) string { return fmt.Sprintf("%x/%d", start, shard) }

func moveText(mv placement.Move) string {
	s := fmt.Sprintf("move %d to shard %d: %v", mv.ID, mv.To, mv.Step)
	if mv.Abort {
		s += ", rolling back (" + mv.Reason + ")"
	}
	return s
}
