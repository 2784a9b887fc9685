package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/wardenlock/warden/loadtest"
)

func TestExpandGivesWardenAColumnPerShardCount(t *testing.T) {
	got := expand([]string{"warden", "etcd"}, []int{1, 8})
	want := []system{{"warden-1", "warden", 1}, {"warden-8", "warden", 8}, {"etcd", "etcd", 0}}
	if len(got) != len(want) {
		t.Fatalf("expand = %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("expand[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	if got := expand([]string{"warden"}, []int{8}); len(got) != 1 || got[0].name != "warden" || got[0].shards != 8 {
		t.Fatalf("one shard count: %+v", got)
	}
}

func TestShardCounts(t *testing.T) {
	if got, err := shardCounts("1, 8"); err != nil || len(got) != 2 || got[0] != 1 || got[1] != 8 {
		t.Fatalf("shardCounts(1, 8) = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "x", "1,,8", "-2"} {
		if _, err := shardCounts(bad); err == nil {
			t.Fatalf("shardCounts(%q) accepted", bad)
		}
	}
}

func outcome(system, label, scenario string, clients int, metrics map[string]float64, ops map[string]loadtest.Stats) loadtest.Outcome {
	r := &loadtest.Result{Scenario: scenario, Clients: clients, Metrics: metrics, Ops: ops}
	return loadtest.Outcome{System: system, Label: label, Median: r, Runs: []*loadtest.Result{r}}
}

func TestMarkdownRatiosPerWardenColumn(t *testing.T) {
	const un, ct = "uncontended c=1024", "contended c=32, 1 hot lock"
	ops := func(v float64) map[string]float64 { return map[string]float64{"lock_ops_per_s": v} }
	hand := func(v float64) map[string]float64 { return map[string]float64{"handoffs_per_s": v} }
	outs := []loadtest.Outcome{
		outcome("warden-1", un, "uncontended", 1024, ops(50000), nil),
		outcome("warden-1", ct, "contended", 32, hand(1000), nil),
		outcome("warden-8", un, "uncontended", 1024, ops(40000), nil),
		outcome("warden-8", ct, "contended", 32, hand(500), nil),
		outcome("etcd", un, "uncontended", 1024, ops(2000), nil),
		outcome("etcd", ct, "contended", 32, hand(100), nil),
		outcome("zookeeper", ct, "contended", 32, hand(400), nil),
		outcome("redis", un, "uncontended", 1024, ops(40000), nil),
	}
	m := loadtest.Machine{Floor: &loadtest.RoundFacts{Sync: true, Rounds: loadtest.Stats{P50Ms: 0.5, MeanMs: 0.5}, Ceiling: 2000}}
	var b bytes.Buffer
	if err := markdown(&b, m, outs, nil, 5*time.Second, 3, []int{1, 8}); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"run once per shard count: 1 data shards (column warden-1), 8 data shards (column warden-8)",
		"| target | warden-1 | warden-8 |",
		"| uncontended ≥ 25× etcd's lock cycles (1,024 clients) | 25.00× | 20.00× |",
		"| uncontended > Redis SET NX cycles (1,024 clients) | 1.25× | 1.00× |",
		"| contended ≥ 10× etcd's hand-offs | 10.00× | 5.00× |",
		"| contended ≥ 3× ZooKeeper's hand-offs | 2.50× | 1.25× |",
		"| uncontended ≥ 25× etcd's lock cycles (256 clients) | – | – |",
		// hand-off time over the floor's mean round: 2000/1000, 2000/500, 2000/100, 2000/400
		"| contended hand-off time ÷ the floor's mean round | 2.0× | 4.0× | 20.0× | 5.0× | – |",
	} {
		if !strings.Contains(md, want) {
			t.Fatalf("report lacks %q:\n%s", want, md)
		}
	}
}
