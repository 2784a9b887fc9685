package admin

import (
	"time"

	"github.com/wardenlock/warden/placement"
)

// DecisionInfo is one recorded shard lifecycle decision.
type DecisionInfo struct {
	Seq    uint64    `json:"seq"`
	At     time.Time `json:"at"`
	Action string    `json:"action"` // create, activate, retire, stop
	Shard  uint64    `json:"shard"`
	Reason string    `json:"reason,omitempty"`
}

// decisionsOf lists the table's shard decisions, oldest first.
func decisionsOf(t *placement.Table) []DecisionInfo {
	out := make([]DecisionInfo, 0, len(t.Decisions))
	for _, d := range t.Decisions {
		out = append(out, DecisionInfo{Seq: d.Seq, At: time.UnixMilli(d.At).UTC(), Action: d.Action, Shard: d.Shard, Reason: d.Reason})
	}
	return out
}
