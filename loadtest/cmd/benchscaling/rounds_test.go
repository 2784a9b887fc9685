package main

import (
	"reflect"
	"strings"
	"testing"
)

func TestRoundOrderReversesEveryOtherRound(t *testing.T) {
	leaders := []int{1, 2, 4, 8}
	if got := roundOrder(leaders, 1); !reflect.DeepEqual(got, []int{1, 2, 4, 8}) {
		t.Fatalf("round 1: %v", got)
	}
	if got := roundOrder(leaders, 2); !reflect.DeepEqual(got, []int{8, 4, 2, 1}) {
		t.Fatalf("round 2: %v", got)
	}
	if !reflect.DeepEqual(leaders, []int{1, 2, 4, 8}) {
		t.Fatalf("roundOrder changed its input: %v", leaders)
	}
}

// The median is a measured run (the lower middle one of an even count),
// rows come out per node count in the order they were run with leaders
// ascending, and the growth line says when a step does not grow.
func TestMediansAndGrowth(t *testing.T) {
	r := func(round, nodes, leaders int, ops float64) row {
		return row{round: round, nodes: nodes, leaders: leaders, opsPerSec: ops, leadersOn: []int{leaders}, cores: []float64{0.25}}
	}
	rows := []row{
		r(1, 5, 1, 100), r(1, 5, 2, 150), r(1, 3, 1, 90), r(1, 3, 2, 80),
		r(2, 5, 2, 130), r(2, 5, 1, 120), r(2, 3, 2, 85), r(2, 3, 1, 95),
		r(3, 5, 1, 110), r(3, 5, 2, 170), r(3, 3, 1, 70), r(3, 3, 2, 75),
	}
	ms := medianRows(rows)
	var got [][3]float64
	for _, m := range ms {
		got = append(got, [3]float64{float64(m.nodes), float64(m.leaders), m.opsPerSec})
	}
	want := [][3]float64{{5, 1, 110}, {5, 2, 150}, {3, 1, 90}, {3, 2, 80}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("medians %v, want %v", got, want)
	}
	if !reflect.DeepEqual(ms[0].runs, []float64{100, 120, 110}) {
		t.Fatalf("runs of 5 nodes, 1 leader: %v", ms[0].runs)
	}
	even := medianRows([]row{r(1, 3, 1, 10), r(2, 3, 1, 30), r(3, 3, 1, 20), r(4, 3, 1, 40)})
	if even[0].opsPerSec != 20 {
		t.Fatalf("median of four runs: %v, want the lower middle run 20", even[0].opsPerSec)
	}
	lines := growthLines(ms)
	if !strings.Contains(lines, "5 nodes, medians over 3 rounds: 1 leader(s) 110 → 2: 150 (1.36×); grows at every step") {
		t.Fatalf("5-node growth line missing:\n%s", lines)
	}
	if !strings.Contains(lines, "3 nodes, medians over 3 rounds: 1 leader(s) 90 → 2: 80 (0.89×); does not grow at every step") {
		t.Fatalf("3-node growth line missing:\n%s", lines)
	}
	if tbl := mediansTable(ms); !strings.Contains(tbl, "| 5 | 2 | 150 | 1.36 | 150, 130, 170 |") {
		t.Fatalf("medians table:\n%s", tbl)
	}
}
