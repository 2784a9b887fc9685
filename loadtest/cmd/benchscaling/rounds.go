package main

import (
	"fmt"
	"slices"
	"strings"
)

// Rounds. One sweep on this shared machine moves by 10–20 % between runs of
// the same row, as much as the growth it is meant to show, so with
// --rounds N the whole sweep runs N times and every row is read off its
// median. Leader counts run in reverse order every other round, so a drift
// of the machine over the run (other jobs, a warming disk) does not favour
// the rows that come first.

// roundOrder is the order of the leader counts in a round (1-based): as
// given in odd rounds, reversed in even ones.
func roundOrder(leaders []int, round int) []int {
	out := slices.Clone(leaders)
	if round%2 == 0 {
		slices.Reverse(out)
	}
	return out
}

// medianRow is one configuration over the rounds: the median row by
// throughput (its other figures are that run's) and every run's throughput.
type medianRow struct {
	row
	runs []float64 // ops/s of every round, in round order
}

// medianRows groups the rows by configuration, in the order the
// configurations first appear with leaders ascending per node count, and
// takes each group's median run by throughput (the lower middle one for an
// even count, so a median is always a measured run).
func medianRows(rows []row) []medianRow {
	type key struct{ nodes, leaders int }
	groups := map[key][]row{}
	var keys []key
	for _, r := range rows {
		k := key{r.nodes, r.leaders}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], r)
	}
	slices.SortStableFunc(keys, func(a, b key) int {
		if a.nodes != b.nodes {
			return indexOf(rows, a.nodes) - indexOf(rows, b.nodes)
		}
		return a.leaders - b.leaders
	})
	var out []medianRow
	for _, k := range keys {
		g := groups[k]
		m := medianRow{}
		for _, r := range g {
			m.runs = append(m.runs, r.opsPerSec)
		}
		sorted := slices.Clone(g)
		slices.SortFunc(sorted, func(a, b row) int {
			switch {
			case a.opsPerSec < b.opsPerSec:
				return -1
			case a.opsPerSec > b.opsPerSec:
				return 1
			}
			return 0
		})
		m.row = sorted[(len(sorted)-1)/2]
		out = append(out, m)
	}
	return out
}

// indexOf is the position of the first row with this node count.
func indexOf(rows []row, nodes int) int {
	return slices.IndexFunc(rows, func(r row) bool { return r.nodes == nodes })
}

// mediansTable is the markdown table of the medians.
func mediansTable(ms []medianRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n**Medians over the rounds** (each row is the median run by throughput; its other columns are that run's):\n\n")
	b.WriteString("| nodes | shard leaders | median ops/s | × 1 leader | every round's ops/s | ops per entry | server CPU µs/op | acquire ms p50 / p99 | node CPU, cores [leaders] |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	base := map[int]float64{}
	for _, m := range ms {
		if _, ok := base[m.nodes]; !ok {
			base[m.nodes] = m.opsPerSec
		}
		var runs []string
		for _, v := range m.runs {
			runs = append(runs, fmt.Sprintf("%.0f", v))
		}
		fmt.Fprintf(&b, "| %d | %d | %.0f | %.2f | %s | %.1f | %.0f | %.1f / %.1f | %s |\n", m.nodes, m.leaders, m.opsPerSec,
			m.opsPerSec/base[m.nodes], strings.Join(runs, ", "), m.opsPerEntry, m.serverCPUPerOp(), m.p50, m.p99, m.nodeCPU(0))
	}
	return b.String()
}

// growthLines says, per node count, how the median throughput moves from
// each leader count to the next, and whether it grows at every step.
func growthLines(ms []medianRow) string {
	var b strings.Builder
	var order []int
	by := map[int][]medianRow{}
	for _, m := range ms {
		if _, ok := by[m.nodes]; !ok {
			order = append(order, m.nodes)
		}
		by[m.nodes] = append(by[m.nodes], m)
	}
	for _, n := range order {
		g := by[n]
		var steps []string
		grows := true
		for i, m := range g {
			if i == 0 {
				steps = append(steps, fmt.Sprintf("%d leader(s) %.0f", m.leaders, m.opsPerSec))
				continue
			}
			ratio := m.opsPerSec / g[i-1].opsPerSec
			if ratio <= 1 {
				grows = false
			}
			steps = append(steps, fmt.Sprintf("%d: %.0f (%.2f×)", m.leaders, m.opsPerSec, ratio))
		}
		verdict := "grows at every step"
		if !grows {
			verdict = "does not grow at every step"
		}
		last := g[len(g)-1]
		fmt.Fprintf(&b, "- %d nodes, medians over %d rounds: %s; %s, %d leaders ÷ %d: %.2f×.\n",
			n, len(g[0].runs), strings.Join(steps, " → "), verdict, last.leaders, g[0].leaders, last.opsPerSec/g[0].opsPerSec)
	}
	return b.String()
}
