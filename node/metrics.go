package node

import (
	"github.com/lni/dragonboat/v4"

	"github.com/wardenlock/warden/audit"
	"github.com/wardenlock/warden/control"
	"github.com/wardenlock/warden/internal/raftwal"
	"github.com/wardenlock/warden/metrics"
	"github.com/wardenlock/warden/router"
	"github.com/wardenlock/warden/statemachine"
)

// metricsConfig is what the node's metrics observe (metrics.Config): its
// Raft host, router and audit store (nil: none).
func metricsConfig(h *control.Host, r *router.Server, a *audit.Store) metrics.Config {
	cfg := metrics.Config{Node: metricsNode{h}, Router: r}
	if a != nil {
		cfg.Audit = a
	}
	return cfg
}

// metricsNode is the node's Raft host as its metrics see it (metrics.Node).
type metricsNode struct{ *control.Host }

var _ metrics.Node = metricsNode{}

func (n metricsNode) Replica(id uint64) (metrics.Replica, bool) {
	s, ok := n.Host.Shard(id)
	if !ok {
		return nil, false
	}
	return s, true
}

func (n metricsNode) Raft() []metrics.RaftInfo {
	nh := n.NodeHost()
	var out []metrics.RaftInfo
	for _, si := range nh.GetNodeHostInfo(dragonboat.NodeHostInfoOption{SkipLogInfo: true}).ShardInfoList {
		ri := metrics.RaftInfo{Shard: si.ShardID, Replica: si.ReplicaID, Leader: si.LeaderID, Term: si.Term}
		if lr, err := nh.GetLogReader(si.ShardID); err == nil {
			_, ri.Logged = lr.GetRange()
			ri.HasLog = true
		}
		out = append(out, ri)
	}
	return out
}

func (n metricsNode) Stats(id uint64) (metrics.Stats, bool) {
	v, err := n.NodeHost().StaleRead(id, statemachine.StatsQuery{})
	if err != nil {
		return metrics.Stats{}, false
	}
	st, ok := v.(statemachine.Stats)
	return metrics.Stats{Applied: st.Applied, Locks: st.Locks, Waiters: st.Waiters, Leases: st.Leases, KVs: st.KVs, Fence: st.Fence}, ok
}

func (n metricsNode) WAL() metrics.WAL {
	if ws := n.WALStats(); ws != nil {
		return walStats{ws}
	}
	return nil
}

// walStats is the Raft log store's counters as metrics.WAL.
type walStats struct{ s *raftwal.Stats }

func (w walStats) Syncs() (uint64, float64, []float64, []uint64) {
	count, seconds, cum := w.s.Snapshot()
	return count, seconds, raftwal.SyncBuckets[:], cum[:]
}

func (w walStats) Rotations() (uint64, float64, []float64, []uint64, uint64, uint64) {
	r := w.s.Rotations()
	return r.Count, r.Seconds, raftwal.RotationBuckets[:], r.Cumulative[:], r.CopiedBytes, r.CopiedReplicas
}
