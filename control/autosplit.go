package control

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/statemachine"
	"github.com/wardenlock/warden/wire"
)

// RangePolicy tunes the placement loop's range work on the meta leader:
// splitting hot ranges and moving ranges from busy shards to idle ones. The
// zero value turns both off.
type RangePolicy struct {
	AutoSplit      bool
	SplitOpsPerSec float64 // a range applying more ops/s than this is split in two (default 5000)
	Rebalance      bool
	// RebalanceRatio: a range moves when the busiest shard applies more
	// than this many times the ops/s of the idlest (default 2).
	RebalanceRatio float64
	MinOpsPerSec   float64       // below this a shard counts as idle, and nothing is rebalanced (default 100)
	Every          time.Duration // how often the loads are sampled (default 10 s)
}

func (p RangePolicy) withDefaults() RangePolicy {
	if p.SplitOpsPerSec <= 0 {
		p.SplitOpsPerSec = 5000
	}
	if p.RebalanceRatio <= 1 {
		p.RebalanceRatio = 2
	}
	if p.MinOpsPerSec <= 0 {
		p.MinOpsPerSec = 100
	}
	if p.Every <= 0 {
		p.Every = 10 * time.Second
	}
	return p
}

// rangeRate is one range's load over the last sample.
type rangeRate struct {
	r    wire.Range
	rate float64 // ops/s
}

// rangeAction is what the planner decided: a split at key, a move of the
// range starting at key to shard, or nothing (op "").
type rangeAction struct {
	op    string
	key   string
	shard uint64
}

// planRanges picks at most one action: split the hottest range over the
// threshold, else move a range from the busiest shard to the idlest when
// they are out of balance. Nothing while a move is in flight.
func planRanges(t *placement.Table, rates []rangeRate, p RangePolicy) rangeAction {
	if len(t.RangeMoves) > 0 {
		return rangeAction{}
	}
	if p.AutoSplit {
		var hot *rangeRate
		for i := range rates {
			if rates[i].rate > p.SplitOpsPerSec && (hot == nil || rates[i].rate > hot.rate) {
				hot = &rates[i]
			}
		}
		if hot != nil {
			if key, ok := midKey(hot.r.Start, hot.r.End); ok {
				return rangeAction{op: "split", key: key}
			}
		}
	}
	if !p.Rebalance || len(t.ActiveShards()) < 2 {
		return rangeAction{}
	}
	load := map[uint64]float64{}
	count := map[uint64]int{}
	for _, s := range t.Shards {
		load[s.ID] = 0
	}
	for _, rr := range rates {
		load[rr.r.Shard] += rr.rate
		count[rr.r.Shard]++
	}
	var busy, idle uint64
	for _, s := range t.Shards {
		if busy == 0 || load[s.ID] > load[busy] {
			busy = s.ID
		}
		if s.State == placement.ShardActive && (idle == 0 || load[s.ID] < load[idle]) {
			idle = s.ID // ranges move only to active shards
		}
	}
	if busy == idle || load[busy] < p.MinOpsPerSec || load[busy] <= p.RebalanceRatio*load[idle] || count[busy] < 2 {
		return rangeAction{}
	}
	// Move the range that brings the two closest to even.
	gap := (load[busy] - load[idle]) / 2
	var best *rangeRate
	for i := range rates {
		rr := &rates[i]
		if rr.r.Shard != busy || rr.rate >= load[busy]-load[idle] {
			continue // moving it would only swap which shard is busy
		}
		if best == nil || abs(rr.rate-gap) < abs(best.rate-gap) {
			best = rr
		}
	}
	if best == nil {
		return rangeAction{}
	}
	return rangeAction{op: "move", key: best.r.Start, shard: idle}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// midKey returns the route key halfway through [start, end) ("" ends are
// the ends of the 64-bit space); false when the range is a single key.
func midKey(start, end string) (string, bool) {
	lo := keyValue(start, 0)
	hi := keyValue(end, 1<<64-1)
	if end != "" {
		hi-- // end is exclusive
	}
	if hi <= lo {
		return "", false
	}
	mid := lo + (hi-lo)/2 + 1
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], mid)
	return string(b[:]), true
}

func keyValue(k string, empty uint64) uint64 {
	if k == "" {
		return empty
	}
	var b [8]byte
	copy(b[:], k)
	return binary.BigEndian.Uint64(b[:])
}

// rangeSampler turns the replicas' op counters into rates.
type rangeSampler struct {
	last   map[string]uint64 // "start/shard" → ops at the last sample
	lastAt time.Time
}

// placeRanges runs one round of automatic range placement on the meta
// leader, at most every Policy.Every.
func (h *Host) placeRanges(t *placement.Table) {
	p := h.cfg.Ranges.withDefaults()
	if !p.AutoSplit && !p.Rebalance || h.Leader(placement.MetaShard) != h.cfg.NodeID {
		return
	}
	now := time.Now()
	if now.Sub(h.sampler.lastAt) < p.Every {
		return
	}
	cur := map[string]uint64{}
	var rates []rangeRate
	dt := now.Sub(h.sampler.lastAt).Seconds()
	for _, id := range h.ShardIDs() {
		v, err := h.nh.StaleRead(id, statemachine.RangeLoadQuery{})
		if err != nil {
			continue
		}
		l, _ := v.(statemachine.RangeLoad)
		for i, r := range l.Ranges {
			if i >= len(l.Ops) {
				break
			}
			k := fmt.Sprintf("%x/%d", r.Start, id)
			cur[k] = l.Ops[i]
			if prev, ok := h.sampler.last[k]; ok && l.Ops[i] >= prev && !h.sampler.lastAt.IsZero() {
				rates = append(rates, rangeRate{r: r, rate: float64(l.Ops[i]-prev) / dt})
			}
		}
	}
	first := h.sampler.lastAt.IsZero()
	h.sampler.last, h.sampler.lastAt = cur, now
	if first {
		return
	}
	a := planRanges(t, rates, p)
	if a.op == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := h.RangeCommand(ctx, placement.RangeCommand{Op: a.op, Key: a.key, Shard: a.shard}); err != nil {
		h.log.Warn("automatic range placement refused", "op", a.op, "err", err)
		return
	}
	h.log.Info("automatic range placement", "op", a.op, "key", a.key, "shard", a.shard)
}
