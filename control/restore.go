package control

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/statemachine"
	"github.com/wardenlock/warden/wire"
)

// A restore brings a backup into a new cluster through the log: the first
// member installs the backup's range table in the meta group, and each data
// shard's leader proposes one restore entry with the shard's dump (see
// statemachine/restore.go). Until its entry has applied, a shard is left
// out of range reconciliation, so it owns no range and refuses every
// client request (WrongShard): nothing can be written before the restored
// state is in place.

// RestorePlan is what a node restores on its first start.
type RestorePlan struct {
	// Table is the backed-up range table; its ranges and generation are
	// kept, its shard replicas and nodes are replaced by this cluster's.
	Table *placement.Table
	// Shards maps each data shard to its dump and fence floor.
	Shards map[uint64]ShardRestore
	// Done is called once every shard's restore entry has applied (or was
	// refused); refused lists the shards that already held state.
	Done func(refused []uint64)
}

// ShardRestore is one shard's part of a restore.
type ShardRestore struct {
	Dump  []byte
	Floor uint64 // every token issued after the restore is above it
}

// shardIDs are the backup's data shards, ascending.
func (p *RestorePlan) shardIDs() []uint64 {
	ids := make([]uint64, 0, len(p.Shards))
	for id := range p.Shards {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

func (p *RestorePlan) check(ids []uint64, depth int) error {
	if len(ids) == 0 {
		return fmt.Errorf("shard: the backup has no data shard")
	}
	if p.Table == nil {
		return fmt.Errorf("shard: restore without a range table")
	}
	if p.Table.NamespaceDepth != depth {
		return fmt.Errorf("shard: the backup was cut at namespace depth %d, this cluster uses %d", p.Table.NamespaceDepth, depth)
	}
	if len(p.Shards) != len(ids) {
		return fmt.Errorf("shard: the backup has %d data shards, this cluster %d", len(p.Shards), len(ids))
	}
	for _, id := range ids {
		sr, ok := p.Shards[id]
		if !ok {
			return fmt.Errorf("shard: the backup has no shard %d", id)
		}
		if len(sr.Dump) > statemachine.MaxDump {
			return fmt.Errorf("shard: the dump of shard %d is %d bytes, over the %d a restore entry may carry", id, len(sr.Dump), statemachine.MaxDump)
		}
	}
	for _, r := range p.Table.Ranges {
		if _, ok := p.Shards[r.Shard]; !ok {
			return fmt.Errorf("shard: the backup's table names shard %d, which it has no dump of", r.Shard)
		}
	}
	return nil
}

// restoreTable is the meta group's first table on a restored cluster.
func (h *Host) restoreTable() *placement.Table {
	src := h.cfg.Restore.Table
	t := &placement.Table{Gen: src.Gen, NamespaceDepth: src.NamespaceDepth, Ranges: append([]wire.Range(nil), src.Ranges...)}
	for _, id := range h.bootIDs() {
		t.Shards = append(t.Shards, placement.ShardInfo{ID: id, Replicas: h.bootReplicas(id)})
	}
	// Shard ids the backed-up cluster gave out stay used.
	t.NextShard = src.NextShardID()
	return t
}

// restoring reports whether a shard still waits for its restore entry.
func (h *Host) restoring(id uint64) bool {
	s, ok := h.Shard(id)
	return ok && s.Restoring()
}

// restoreLoop proposes each shard's restore entry from whichever node leads
// it, until every shard is restored. Retries are safe: a repeated entry is a
// no-op once the floor is in place.
func (h *Host) restoreLoop() {
	var refused []uint64
	for {
		h.mu.RLock()
		pending := make([]uint64, 0, len(h.pendingRestore))
		for id := range h.pendingRestore {
			pending = append(pending, id)
		}
		h.mu.RUnlock()
		if len(pending) == 0 {
			break
		}
		sort.Slice(pending, func(i, j int) bool { return pending[i] < pending[j] })
		for _, id := range pending {
			done, wasRefused := h.restoreShard(id)
			if !done {
				continue
			}
			if wasRefused {
				refused = append(refused, id)
			}
			h.mu.Lock()
			delete(h.pendingRestore, id)
			h.mu.Unlock()
			if s, ok := h.Shard(id); ok {
				s.SetRestoring(false)
			}
		}
		select {
		case <-h.stopc:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
	if len(refused) > 0 {
		h.log.Error("restore refused: these shards already held state", "shards", refused)
	} else {
		h.log.Info("restore complete", "shards", len(h.ShardIDs()))
	}
	if h.cfg.Restore.Done != nil {
		h.cfg.Restore.Done(refused)
	}
}

// restoreShard tries once; done when the shard is restored (by this node or
// another) or refused.
func (h *Host) restoreShard(id uint64) (done, refused bool) {
	sr := h.cfg.Restore.Shards[id]
	s, ok := h.Shard(id)
	if !ok {
		return true, false // no longer hosted here
	}
	if v, err := h.nh.StaleRead(id, statemachine.StatsQuery{}); err == nil {
		if st, _ := v.(statemachine.Stats); st.Fence >= sr.Floor {
			return true, false // applied here already (proposed by another node)
		}
	}
	if !s.IsLeader() {
		return false, false
	}
	stamp := s.LastTime()
	if stamp == 0 {
		stamp = h.cfg.Clock.Now().UnixMilli()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := h.nh.SyncPropose(ctx, h.nh.GetNoOPSession(id), statemachine.EncodeRestore(stamp, sr.Floor, sr.Dump))
	if err != nil {
		h.log.Warn("restore entry not applied yet", "shard", id, "err", err)
		return false, false
	}
	out, err := statemachine.DecodeResults(res.Data)
	if err != nil || len(out) != 1 {
		h.log.Error("restore entry: unreadable result", "shard", id, "err", err)
		return false, false
	}
	switch out[0].Code {
	case wire.OK:
		h.log.Info("shard restored", "shard", id, "floor", out[0].Token, "rev", out[0].Rev)
		return true, false
	case wire.RestoreRefused:
		h.log.Error("shard restore refused", "shard", id, "msg", out[0].Msg)
		return true, true
	default:
		h.log.Error("shard restore failed", "shard", id, "code", out[0].Code, "msg", out[0].Msg)
		return true, true
	}
}

// Dump reads a data shard's whole state with a linearizable read: the
// state at one point between the call and its return.
func (h *Host) Dump(ctx context.Context, shardID uint64) (statemachine.Dump, error) {
	if _, ok := h.Shard(shardID); !ok {
		return statemachine.Dump{}, wire.Errorf(wire.NotFound, "no local replica of shard %d", shardID)
	}
	v, err := h.nh.SyncRead(ctx, shardID, statemachine.DumpQuery{})
	if err != nil {
		return statemachine.Dump{}, err
	}
	d, ok := v.(statemachine.Dump)
	if !ok {
		return statemachine.Dump{}, fmt.Errorf("shard: unexpected dump result %T", v)
	}
	return d, nil
}
