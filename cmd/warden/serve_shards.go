package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/wardenlock/warden/control"
	"github.com/wardenlock/warden/node"
)

// shardPolicyFlags are `warden serve`'s knobs of the automatic shard
// count (control.ShardPolicy). Every node takes them; the meta leader's
// apply.
type shardPolicyFlags struct {
	Auto         bool
	SaturatedOps float64
	SaturatedCPU float64
	IdleOps      float64
	Sustain      time.Duration
	IdleFor      time.Duration
	Cooldown     time.Duration
	Min, Max     int
}

func (p *shardPolicyFlags) register(f *pflag.FlagSet) {
	d := control.ShardPolicy{}.WithDefaults()
	f.BoolVar(&p.Auto, "shard-policy", false, fmt.Sprintf("the meta leader adds a data shard when a node that leads shards stays saturated (ops/s or CPU) and another node has room, and retires shards that stay idle; a new cluster then starts with %d shard unless --shards is given", control.PolicyInitialShards))
	f.Float64Var(&p.SaturatedOps, "shard-saturated-ops", d.SaturatedOps, "ops/s the shards one node leads apply together that count as saturated (--shard-policy)")
	f.Float64Var(&p.SaturatedCPU, "shard-saturated-cpu", d.SaturatedCPU, "share of a node's CPU (its cgroup's limit, else the machine's cores) that counts as saturated (--shard-policy; over 0, at most 1)")
	f.Float64Var(&p.IdleOps, "shard-idle-ops", d.IdleOps, "a shard applying fewer ops/s than this is idle (--shard-policy; under half of --shard-saturated-ops)")
	f.DurationVar(&p.Sustain, "shard-sustain", d.Sustain, "how long saturation lasts before a shard is added (--shard-policy)")
	f.DurationVar(&p.IdleFor, "shard-idle-for", d.IdleFor, "how long a shard stays idle before it is retired (--shard-policy)")
	f.DurationVar(&p.Cooldown, "shard-cooldown", d.Cooldown, "the least time between two shard decisions (--shard-policy)")
	f.IntVar(&p.Min, "shard-min", d.MinShards, "active data shards the policy never goes below")
	f.IntVar(&p.Max, "shard-max", d.MaxShards, "active data shards the policy never goes above")
}

// apply puts the policy into cfg; shardsSet: --shards was given.
func (p *shardPolicyFlags) apply(cfg *node.Config, shardsSet bool) error {
	switch {
	case p.SaturatedOps <= 0 || p.IdleOps <= 0:
		return fmt.Errorf("--shard-saturated-ops %g, --shard-idle-ops %g: want positive rates", p.SaturatedOps, p.IdleOps)
	case p.SaturatedCPU <= 0 || p.SaturatedCPU > 1:
		return fmt.Errorf("--shard-saturated-cpu %g: want a share over 0 and at most 1", p.SaturatedCPU)
	case p.Sustain <= 0 || p.IdleFor <= 0 || p.Cooldown <= 0:
		return fmt.Errorf("--shard-sustain %v, --shard-idle-for %v, --shard-cooldown %v: want positive durations", p.Sustain, p.IdleFor, p.Cooldown)
	case p.Min < 1 || p.Max < p.Min:
		return fmt.Errorf("--shard-min %d, --shard-max %d: want 1 <= min <= max", p.Min, p.Max)
	}
	sp := control.ShardPolicy{Auto: p.Auto, SaturatedOps: p.SaturatedOps, SaturatedCPU: p.SaturatedCPU, IdleOps: p.IdleOps, Sustain: p.Sustain,
		IdleFor: p.IdleFor, Cooldown: p.Cooldown, MinShards: p.Min, MaxShards: p.Max}
	if err := sp.Validate(); err != nil {
		return err
	}
	cfg.ShardPolicy = sp
	if p.Auto && !shardsSet {
		cfg.DataShards = control.PolicyInitialShards
	}
	return nil
}
