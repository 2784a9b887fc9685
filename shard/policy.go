package shard

import (
	"sync"
	"time"
)

// PolicyState is the automatic shard policy's last reading and decision
// on the meta leader (policy.go), as `warden shards` shows it.
type PolicyState struct {
	At      time.Time `json:"at"`
	Enabled bool      `json:"enabled"`
	// LeaderOps is each node's applied ops/s summed over the shards it
	// leads; ShardOps each shard's ops/s.
	LeaderOps map[uint64]float64 `json:"leader_ops"`
	ShardOps  map[uint64]float64 `json:"shard_ops"`
	// Verdict says what the policy concluded at its last reading (and
	// why it did nothing, when it did nothing).
	Verdict string `json:"verdict"`
}

// policyMemo holds the last PolicyState for readers outside the loop.
type policyMemo struct {
	mu   sync.Mutex
	last *PolicyState
}

// PolicyState returns the policy's last reading on this node (nil when it
// never ran here: the policy runs on the meta leader).
func (h *Host) PolicyState() *PolicyState {
	h.policy.mu.Lock()
	defer h.policy.mu.Unlock()
	if h.policy.last == nil {
		return nil
	}
	c := *h.policy.last
	return &c
}
