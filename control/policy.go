package control

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/wardenlock/warden/internal/cpuload"
	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/statemachine"
)

// The shard policy runs on the meta leader and follows the load with the
// number of data shards:
//
//   - add a shard when a node that leads shards is saturated for Sustain
//     (the shards it leads apply more than SaturatedOps ops/s together, or
//     the node uses more than SaturatedCPU of the CPU it may use) and
//     another active node has room (its leaderships apply less than half
//     of SaturatedOps, and its CPU with half the saturated node's added
//     stays under SaturatedCPU): the new shard takes its share of the key
//     space, and the leader balancer gives its leadership to a node with
//     few;
//   - retire a shard that stays idle (under IdleOps ops/s) for IdleFor,
//     when more than MinShards are active and the rest would stay under
//     half of SaturatedOps per node;
//   - never two decisions within Cooldown, and none while a shard is being
//     created, filled or retired or a range is moving.
//
// The CPU rule makes the policy independent of how fast a machine is: a
// leader saturates at whatever rate its machine allows, and a node that
// already works near its limit as a follower is no room for a new leader
// (on 3 equal machines one shard, whose followers are busy too, stays the
// layout). CPU readings come from every node's status (internal/cpuload);
// where a node does not measure its CPU, the policy reads ops/s alone, and
// a node whose CPU is not known is never room.
//
// The saturated and idle thresholds are far apart, both must hold for a
// while, and each decision is followed by a cooldown, so the count does not
// flap. Every decision is recorded in the meta group with its reason
// (`warden shards`), and each reading is kept for `warden shards` too.

// ShardPolicy configures the automatic shard count. The zero value is off.
type ShardPolicy struct {
	Auto         bool
	SaturatedOps float64       // ops/s of a node's leaderships that count as saturated (default DefaultSaturatedOps)
	SaturatedCPU float64       // share of a node's CPU capacity that counts as saturated (default 0.8)
	IdleOps      float64       // a shard under this many ops/s is idle (default 5)
	Sustain      time.Duration // saturation must last this long before a shard is added (default 30 s)
	IdleFor      time.Duration // idleness must last this long before a shard is retired (default 10 min)
	Cooldown     time.Duration // the least time between two decisions (default 1 min)
	Every        time.Duration // how often the load is read (default 5 s)
	MinShards    int           // active shards the policy never goes below (default 1)
	MaxShards    int           // active shards the policy never goes above (default 64)
}

// DefaultSaturatedOps is the per-node leadership load the policy treats as
// saturated by default: about half of what the one shard leader of a
// 3-node cluster applied at its peak on a 2-core machine (docs/scaling.md);
// set it from a cluster's own peak per leader.
const DefaultSaturatedOps = 40000

// DefaultSaturatedCPU is the share of its CPU capacity at which a node
// counts as saturated by default.
const DefaultSaturatedCPU = 0.8

// PolicyInitialShards is how many data shards a new cluster starts with
// under the policy: one Raft group already uses every initial machine (its
// replicas are on all of them), and on 3 nodes one shard is the fastest
// layout measured (docs/scaling.md); the policy adds more as leaders
// saturate.
const PolicyInitialShards = 1

// WithDefaults fills the zero fields.
func (p ShardPolicy) WithDefaults() ShardPolicy {
	if p.SaturatedOps <= 0 {
		p.SaturatedOps = DefaultSaturatedOps
	}
	if p.SaturatedCPU <= 0 {
		p.SaturatedCPU = DefaultSaturatedCPU
	}
	if p.IdleOps <= 0 {
		p.IdleOps = 5
	}
	if p.Sustain <= 0 {
		p.Sustain = 30 * time.Second
	}
	if p.IdleFor <= 0 {
		p.IdleFor = 10 * time.Minute
	}
	if p.Cooldown <= 0 {
		p.Cooldown = time.Minute
	}
	if p.Every <= 0 {
		p.Every = 5 * time.Second
	}
	if p.MinShards <= 0 {
		p.MinShards = 1
	}
	if p.MaxShards <= 0 {
		p.MaxShards = 64
	}
	return p
}

// Validate refuses thresholds that would make the policy flap.
func (p ShardPolicy) Validate() error {
	q := p.WithDefaults()
	if q.IdleOps*2 > q.SaturatedOps {
		return fmt.Errorf("shard policy: the idle threshold (%g ops/s) must be under half the saturated one (%g ops/s)", q.IdleOps, q.SaturatedOps)
	}
	if q.SaturatedCPU > 1 {
		return fmt.Errorf("shard policy: the saturated CPU share %g is over 1", q.SaturatedCPU)
	}
	if q.MinShards > q.MaxShards {
		return fmt.Errorf("shard policy: min shards %d is over max shards %d", q.MinShards, q.MaxShards)
	}
	return nil
}

// PolicyState is the automatic shard policy's last reading and decision
// on the meta leader, as `warden shards` shows it.
type PolicyState struct {
	At      time.Time `json:"at"`
	Enabled bool      `json:"enabled"`
	// LeaderOps is each node's applied ops/s summed over the shards it
	// leads; ShardOps each shard's ops/s.
	LeaderOps map[uint64]float64 `json:"leader_ops"`
	ShardOps  map[uint64]float64 `json:"shard_ops"`
	// Leads is the shards each node leads; a shard the meta leader holds
	// no replica of is missing from ShardOps (its load is not read).
	Leads map[uint64][]uint64 `json:"leads,omitempty"`
	// NodeCPU is each node's CPU use and capacity, as its last status
	// said (absent: nodes that do not measure it, or not heard from).
	NodeCPU map[uint64]cpuload.Reading `json:"node_cpu,omitempty"`
	// Verdict says what the policy concluded at its last reading (and
	// why it did nothing, when it did nothing).
	Verdict string `json:"verdict"`
}

// policyMemo holds the policy's clocks and its last PolicyState.
type policyMemo struct {
	mu   sync.Mutex
	last *PolicyState

	// The rest is the placement loop's alone.
	lastAt       time.Time
	lastOps      map[uint64]uint64 // shard → applied ops at the last reading
	satSince     time.Time         // since when some node is saturated (zero: none is)
	idleSince    map[uint64]time.Time
	lastDecision time.Time
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

func (h *Host) setPolicyState(st *PolicyState) {
	h.policy.mu.Lock()
	h.policy.last = st
	h.policy.mu.Unlock()
}

// shardOps reads each data shard's applied ops counter (the sum of its
// ranges' load counters) from the local replicas.
func (h *Host) shardOps() map[uint64]uint64 {
	out := map[uint64]uint64{}
	for _, id := range h.ShardIDs() {
		v, err := h.nh.StaleRead(id, statemachine.RangeLoadQuery{})
		if err != nil {
			continue
		}
		l, _ := v.(statemachine.RangeLoad)
		var sum uint64
		for _, n := range l.Ops {
			sum += n
		}
		out[id] = sum
	}
	return out
}

// runPolicy takes one reading on the meta leader (at most every
// Policy.Every) and makes at most one decision.
func (h *Host) runPolicy(t *placement.Table) {
	p := h.cfg.Policy.WithDefaults()
	pm := &h.policy
	if !p.Auto || h.Leader(placement.MetaShard) != h.cfg.NodeID {
		pm.lastAt, pm.lastOps, pm.satSince, pm.idleSince = time.Time{}, nil, time.Time{}, nil
		return
	}
	now := time.Now()
	if now.Sub(pm.lastAt) < p.Every {
		return
	}
	cur := h.shardOps()
	prev, dt := pm.lastOps, now.Sub(pm.lastAt).Seconds()
	pm.lastAt, pm.lastOps = now, cur
	if prev == nil {
		return
	}
	st := &PolicyState{At: now.UTC(), Enabled: true, LeaderOps: map[uint64]float64{}, ShardOps: map[uint64]float64{}, Leads: map[uint64][]uint64{}}
	defer h.setPolicyState(st)
	for id, n := range cur {
		if was, ok := prev[id]; ok && n >= was {
			st.ShardOps[id] = float64(n-was) / dt
		}
	}
	for _, n := range t.ActiveNodes() {
		st.LeaderOps[n] = 0
	}
	for _, si := range t.Serving() {
		if l := h.Leader(si.ID); l != 0 {
			st.LeaderOps[l] += st.ShardOps[si.ID]
			st.Leads[l] = append(st.Leads[l], si.ID)
		}
	}
	if f := h.nodeCPU.Load(); f != nil {
		st.NodeCPU = (*f)()
	}
	d := decideShards(t, st, p, pm, now)
	st.Verdict = d.verdict
	if d.action == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	switch d.action {
	case "create":
		var id uint64
		id, err = h.CreateShard(ctx, nil, true, "policy: "+d.reason)
		d.shard = id
	case "retire":
		err = h.RetireShard(ctx, d.shard, "policy: "+d.reason)
	}
	if err != nil {
		st.Verdict = fmt.Sprintf("%s refused: %v", d.action, err)
		h.log.Warn("shard policy decision refused", "action", d.action, "shard", d.shard, "err", err)
		return
	}
	pm.lastDecision, pm.satSince, pm.idleSince = now, time.Time{}, nil
	h.log.Info("shard policy decision", "action", d.action, "shard", d.shard, "reason", d.reason)
}

// shardDecision is what decideShards concluded.
type shardDecision struct {
	action  string // "", create, retire
	shard   uint64 // retire: the shard
	reason  string
	verdict string
}

// decideShards is the policy's judgement on one reading (it updates the
// memo's clocks): pure apart from them, so it is tested on its own.
func decideShards(t *placement.Table, st *PolicyState, p ShardPolicy, pm *policyMemo, now time.Time) shardDecision {
	active := t.ActiveShards()
	busy := len(t.RangeMoves) > 0
	for _, si := range t.Shards {
		busy = busy || si.State != placement.ShardActive || si.Fill
	}
	// The busiest node that leads a shard with load, and the one with most
	// room.
	hot := hottestLeader(st, p)
	cool := roomiest(st, p, hot)
	saturated := hot != 0 && busyness(st, p, hot) > 1
	room := cool != 0 && hasRoom(st, p, cool, hot)
	if saturated {
		if pm.satSince.IsZero() {
			pm.satSince = now
		}
	} else {
		pm.satSince = time.Time{}
	}
	if pm.idleSince == nil {
		pm.idleSince = map[uint64]time.Time{}
	}
	var total float64
	for _, si := range active {
		ops := st.ShardOps[si.ID]
		total += ops
		if ops < p.IdleOps {
			if _, ok := pm.idleSince[si.ID]; !ok {
				pm.idleSince[si.ID] = now
			}
		} else {
			delete(pm.idleSince, si.ID)
		}
	}
	for id := range pm.idleSince {
		if si, ok := t.Shard(id); !ok || si.State != placement.ShardActive {
			delete(pm.idleSince, id)
		}
	}
	loads := describeLoads(st)
	switch {
	case busy:
		// A shard's idleness counts only from a settled layout (a shard
		// being filled is idle until its ranges arrive).
		pm.idleSince = nil
		return shardDecision{verdict: "waiting: a shard is being created, filled or retired, or a range is moving; " + loads}
	case !pm.lastDecision.IsZero() && now.Sub(pm.lastDecision) < p.Cooldown:
		return shardDecision{verdict: fmt.Sprintf("cooling down for %v after the last decision; %s",
			(p.Cooldown - now.Sub(pm.lastDecision)).Round(time.Second), loads)}
	}
	if saturated && now.Sub(pm.satSince) >= p.Sustain {
		switch {
		case len(active) >= p.MaxShards:
			return shardDecision{verdict: fmt.Sprintf("node %d is saturated but the cluster has the most shards allowed (%d); %s", hot, p.MaxShards, loads)}
		case !room:
			return shardDecision{verdict: fmt.Sprintf("node %d is saturated and no other node has room; %s", hot, loads)}
		}
		reason := fmt.Sprintf("node %d is saturated (%s; saturated: %.0f ops/s or CPU %.0f%%) for %v; node %d has room (%s)",
			hot, nodeLoad(st, hot), p.SaturatedOps, 100*p.SaturatedCPU, now.Sub(pm.satSince).Round(time.Second), cool, nodeLoad(st, cool))
		return shardDecision{action: "create", reason: reason, verdict: "adding a shard: " + reason}
	}
	if len(active) > p.MinShards && float64(len(t.ActiveNodes())) > 0 &&
		total/float64(len(t.ActiveNodes())) < p.SaturatedOps/2 {
		var idlest uint64
		for _, si := range active {
			since, ok := pm.idleSince[si.ID]
			if !ok || now.Sub(since) < p.IdleFor {
				continue
			}
			if idlest == 0 || st.ShardOps[si.ID] < st.ShardOps[idlest] || st.ShardOps[si.ID] == st.ShardOps[idlest] && si.ID > idlest {
				idlest = si.ID
			}
		}
		if idlest != 0 {
			reason := fmt.Sprintf("shard %d applied under %.0f ops/s (%.1f) for %v; %d active shards",
				idlest, p.IdleOps, st.ShardOps[idlest], now.Sub(pm.idleSince[idlest]).Round(time.Second), len(active))
			return shardDecision{action: "retire", shard: idlest, reason: reason, verdict: "retiring a shard: " + reason}
		}
	}
	if saturated {
		return shardDecision{verdict: fmt.Sprintf("node %d saturated for %v (adds a shard after %v); %s",
			hot, now.Sub(pm.satSince).Round(time.Second), p.Sustain, loads)}
	}
	return shardDecision{verdict: "steady; " + loads}
}

// busyness is how close node n is to saturation: the larger of its
// leaderships' ops/s against SaturatedOps and its CPU share against
// SaturatedCPU (over 1: saturated).
func busyness(st *PolicyState, p ShardPolicy, n uint64) float64 {
	b := st.LeaderOps[n] / p.SaturatedOps
	if r, ok := st.NodeCPU[n]; ok && r.Capacity > 0 {
		b = max(b, r.Share()/p.SaturatedCPU)
	}
	return b
}

// hottestLeader is the busiest node whose leaderships apply more than
// IdleOps, or lead a shard whose load is not read (0: none): a new shard
// takes load off a leader, not a follower.
func hottestLeader(st *PolicyState, p ShardPolicy) uint64 {
	var hot uint64
	for _, n := range sortedKeys(st.LeaderOps) {
		unread := false
		for _, id := range st.Leads[n] {
			_, read := st.ShardOps[id]
			unread = unread || !read
		}
		if st.LeaderOps[n] <= p.IdleOps && !unread {
			continue
		}
		if hot == 0 || busyness(st, p, n) > busyness(st, p, hot) {
			hot = n
		}
	}
	return hot
}

// roomiest is the least busy node other than hot (0: none).
func roomiest(st *PolicyState, p ShardPolicy, hot uint64) uint64 {
	var cool uint64
	for _, n := range sortedKeys(st.LeaderOps) {
		if n == hot {
			continue
		}
		if cool == 0 || busyness(st, p, n) < busyness(st, p, cool) {
			cool = n
		}
	}
	return cool
}

// hasRoom says whether node cool can lead a share of hot's load: its
// leaderships apply under half of SaturatedOps and, where CPU is read, its
// CPU with half of hot's added stays under SaturatedCPU of its capacity.
// With CPU read on some nodes, one whose CPU is not known has no room.
func hasRoom(st *PolicyState, p ShardPolicy, cool, hot uint64) bool {
	if st.LeaderOps[cool] >= p.SaturatedOps/2 {
		return false
	}
	if len(st.NodeCPU) == 0 {
		return true
	}
	c, ok := st.NodeCPU[cool]
	if !ok || c.Capacity <= 0 {
		return false
	}
	return c.Used+st.NodeCPU[hot].Used/2 < p.SaturatedCPU*c.Capacity
}

// nodeLoad says, for people, what node n's leaderships apply and the CPU
// it uses.
func nodeLoad(st *PolicyState, n uint64) string {
	out := fmt.Sprintf("leads %.0f ops/s", st.LeaderOps[n])
	if r, ok := st.NodeCPU[n]; ok && r.Capacity > 0 {
		out += fmt.Sprintf(", CPU %.0f%% of %.3g cores", 100*r.Share(), r.Capacity)
	}
	return out
}

func describeLoads(st *PolicyState) string {
	var parts []string
	for _, n := range sortedKeys(st.LeaderOps) {
		parts = append(parts, fmt.Sprintf("node %d %s", n, nodeLoad(st, n)))
	}
	return strings.Join(parts, "; ")
}

func sortedKeys(m map[uint64]float64) []uint64 {
	out := make([]uint64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
