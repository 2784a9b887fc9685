package chaos

import (
	"fmt"
	"time"
)

// ShortSchedule is what `make test` runs: kill, partition and pause the
// leader, with the lock register, the fenced set and the failed-acquire
// workload, on 3 nodes.
func ShortSchedule() []Scenario {
	var out []Scenario
	for _, f := range []Fault{KillLeader, PartitionLeader, PauseLeader} {
		out = append(out, Scenario{Name: "short/" + string(f), Nodes: 3, Fault: f,
			Workloads: []string{WRegister, WFenced, WHolds}, Window: 12 * time.Second})
	}
	return out
}

// FullSchedule is `make chaos`: every fault with every workload, on 3 and
// 5 nodes.
func FullSchedule() []Scenario {
	all := []string{WRegister, WFenced, WLeases, WWatch, WElection}
	var out []Scenario
	for _, n := range []int{3, 5} {
		for _, f := range AllFaults {
			out = append(out, Scenario{Name: fmt.Sprintf("full/n%d/%s", n, f), Nodes: n, Fault: f,
				Workloads: all, Window: 40 * time.Second})
		}
	}
	return append(append(out, ShardsSchedule()...), SnapshotsSchedule()...)
}

// SnapshotsSchedule runs kills, partitions and pauses while every replica
// snapshots and compacts its log every 64 KiB (Scenario.Compact), with
// every workload, on 3 nodes (part of the full schedule; `warden-chaos run
// --schedule snapshots` runs it alone). A replica cut off or killed for the
// fault comes back behind the others' compacted logs and catches up from a
// snapshot.
func SnapshotsSchedule() []Scenario {
	var out []Scenario
	for _, f := range []Fault{KillLeader, KillNode, PartitionLeader, PauseLeader} {
		out = append(out, Scenario{Name: "snapshots/n3/" + string(f), Nodes: 3, Fault: f,
			Workloads: []string{WRegister, WFenced, WLeases, WWatch, WElection}, Window: 40 * time.Second, Compact: true})
	}
	return out
}

// ShardsSchedule creates and retires data shards while leaders are killed,
// nodes are killed and leaders are cut off, with the lock register, the
// fenced set and the lease workload, on 3 nodes (part of the full
// schedule; `warden-chaos run --schedule shards` runs it alone).
func ShardsSchedule() []Scenario {
	var out []Scenario
	for _, f := range []Fault{KillLeader, KillNode, PartitionLeader} {
		out = append(out, Scenario{Name: "shards/n3/" + string(f), Nodes: 3, Fault: f,
			Workloads: []string{WRegister, WFenced, WLeases}, Window: 40 * time.Second, ShardChurn: true})
	}
	return out
}

// HoldsSchedule is the long run of the failed-acquire workload: leader
// kills, leader pauses and node kills, one at a time, for window.
func HoldsSchedule(window time.Duration) []Scenario {
	return []Scenario{{Name: "holds/n3/" + string(KillOrPause), Nodes: 3, Fault: KillOrPause,
		Workloads: []string{WHolds}, Window: window}}
}

// BugScenario is the scenario that must catch a test-only bug switch.
func BugScenario(bug string) Scenario {
	switch bug {
	case "no-lease-refresh":
		return Scenario{Name: "bug/" + bug, Nodes: 3, Fault: KillLeader, Workloads: []string{WRegister, WLeases}, Window: 10 * time.Second}
	case "grant-expired-waiter":
		return Scenario{Name: "bug/" + bug, Nodes: 3, Fault: None, Workloads: []string{WLeases}, Window: 12 * time.Second}
	default: // release-ignores-token
		return Scenario{Name: "bug/" + bug, Nodes: 3, Fault: None, Workloads: []string{WRegister}, Window: 8 * time.Second}
	}
}
