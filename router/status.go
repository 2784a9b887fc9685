package router

import (
	"cmp"
	"slices"

	"github.com/wardenlock/warden/internal/buildinfo"
	"github.com/wardenlock/warden/internal/cpuload"
)

// Status is what OpStatus answers (as JSON) and the admin API serves.
type Status struct {
	Node     uint64 `json:"node,omitempty"`
	Version  string `json:"version"`          // this process's build (internal/buildinfo)
	Commit   string `json:"commit,omitempty"` // its commit, when known
	TableGen uint64 `json:"table_gen"`
	Ranges   int    `json:"ranges"`
	Conns    int    `json:"connections"`
	// Forwarded counts requests this router sent on to another node
	// (mostly: to the shard leader, when the client reached a follower).
	Forwarded uint64        `json:"forwarded"`
	Nodes     []NodeStatus  `json:"nodes,omitempty"`
	Shards    []ShardStatus `json:"shards,omitempty"`
	// Passes counts this process's Raft passes and what they carried
	// (Host.RaftPasses): how much per-round work its shards share.
	Passes any `json:"passes,omitempty"`
	// CPU is this process's CPU use over the last few seconds against the
	// cores it may use (absent where the node does not measure it).
	CPU *cpuload.Reading `json:"cpu,omitempty"`
}

// NodeStatus describes one cluster member, and whether this router hears
// from it (liveness.go).
type NodeStatus struct {
	ID         uint64 `json:"id"`
	ClientAddr string `json:"client_addr"`
	RaftAddr   string `json:"raft_addr"`
	Liveness
}

// ShardStatus describes one data shard as this node sees it.
type ShardStatus struct {
	ID       uint64   `json:"id"`
	State    string   `json:"state"` // creating, active, retiring
	Leader   uint64   `json:"leader"`
	Replicas []uint64 `json:"replicas"`
	Ranges   int      `json:"ranges"`
	Local    bool     `json:"local"`
	IsLeader bool     `json:"is_leader"`
	Applied  uint64   `json:"applied,omitempty"`
	Watchers int      `json:"watchers,omitempty"`
	// Entries this replica proposed and the operations they carried
	// (their ratio is the batching achieved).
	Proposals   uint64 `json:"proposals,omitempty"`
	ProposedOps uint64 `json:"proposed_ops,omitempty"`
	// Snapshots this replica saved and recovered from since the process
	// started (Replica.Snapshots).
	SnapshotsSaved     uint64 `json:"snapshots_saved,omitempty"`
	SnapshotsRecovered uint64 `json:"snapshots_recovered,omitempty"`
}

// Forwarded returns how many requests this router has sent on to another
// node since it started: the hops that direct routing exists to save.
func (s *Server) Forwarded() uint64 { return s.forwarded.Load() }

// Status reports what this router knows of the cluster.
func (s *Server) Status() Status {
	bi := buildinfo.Get()
	st := Status{Conns: s.Conns(), Forwarded: s.Forwarded(), Version: bi.Version, Commit: bi.ShortCommit()}
	info := s.routeInfo()
	if h := s.cfg.Host; h != nil {
		st.Node = h.NodeID()
		st.Passes = h.RaftPasses()
		if r, ok := h.CPU(); ok {
			st.CPU = &r
		}
	}
	t := info.Table
	if t == nil {
		return st
	}
	st.TableGen, st.Ranges = t.Gen, len(t.Ranges)
	live := s.NodeLiveness()
	for _, n := range t.Nodes {
		l, ok := live[n.ID]
		if !ok {
			l = Liveness{State: NodeUnknown}
		}
		st.Nodes = append(st.Nodes, NodeStatus{ID: n.ID, ClientAddr: n.ClientAddr, RaftAddr: n.RaftAddr, Liveness: l})
	}
	slices.SortFunc(st.Nodes, func(a, b NodeStatus) int { return cmp.Compare(a.ID, b.ID) })
	for _, si := range t.Shards {
		ss := ShardStatus{ID: si.ID, State: si.State.String(), Leader: info.Leaders[si.ID], Replicas: si.Replicas, Ranges: len(t.RangesOf(si.ID))}
		if h := s.cfg.Host; h != nil {
			if local, ok := h.Replica(si.ID); ok {
				ss.Local, ss.IsLeader = true, local.IsLeader()
				ss.Applied, ss.Watchers = local.AppliedIndex(), local.Watchers()
				ss.Proposals, ss.ProposedOps = local.Batches()
				ss.SnapshotsSaved, ss.SnapshotsRecovered = local.Snapshots()
			}
		}
		st.Shards = append(st.Shards, ss)
	}
	return st
}

// buildVersion is this process's build version.
func buildVersion() string { return buildinfo.Get().Version }
