package router

// Status is what OpStatus answers (as JSON) and the admin API serves.
type Status struct {
	Node     uint64        `json:"node,omitempty"`
	TableGen uint64        `json:"table_gen"`
	Ranges   int           `json:"ranges"`
	Conns    int           `json:"connections"`
	Nodes    []NodeStatus  `json:"nodes,omitempty"`
	Shards   []ShardStatus `json:"shards,omitempty"`
}

// NodeStatus describes one cluster member.
type NodeStatus struct {
	ID         uint64 `json:"id"`
	ClientAddr string `json:"client_addr"`
	RaftAddr   string `json:"raft_addr"`
}

// ShardStatus describes one data shard as this node sees it.
type ShardStatus struct {
	ID       uint64   `json:"id"`
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
}

// Status reports what this router knows of the cluster.
func (s *Server) Status() Status {
	st := Status{Conns: s.Conns()}
	info := s.routeInfo()
	if h := s.cfg.Host; h != nil {
		st.Node = h.NodeID()
	}
	t := info.Table
	if t == nil {
		return st
	}
	st.TableGen, st.Ranges = t.Gen, len(t.Ranges)
	for _, n := range t.Nodes {
		st.Nodes = append(st.Nodes, NodeStatus{ID: n.ID, ClientAddr: n.ClientAddr, RaftAddr: n.RaftAddr})
	}
	for _, si := range t.Shards {
		ss := ShardStatus{ID: si.ID, Leader: info.Leaders[si.ID], Replicas: si.Replicas, Ranges: len(t.RangesOf(si.ID))}
		if h := s.cfg.Host; h != nil {
			if local, ok := h.Shard(si.ID); ok {
				ss.Local, ss.IsLeader = true, local.IsLeader()
				ss.Applied, ss.Watchers = local.AppliedIndex(), local.Watchers()
				ss.Proposals, ss.ProposedOps = local.Batches()
			}
		}
		st.Shards = append(st.Shards, ss)
	}
	return st
}
