package chaos

import (
	"fmt"
	"time"
)

// Cut blocks the directed link from node i to node j.
func (c *Cluster) Cut(i, j int) { c.Links[i][j].Set(Drop, 0) }

// SetLink sets the mode of the link i→j.
func (c *Cluster) SetLink(i, j int, m Mode, delay time.Duration) { c.Links[i][j].Set(m, delay) }

// Heal makes every link pass again.
func (c *Cluster) Heal() {
	for _, row := range c.Links {
		for _, p := range row {
			if p != nil {
				p.Set(Pass, 0)
			}
		}
	}
	c.Log.Add("heal all links")
}

// Isolate cuts every link to and from node i.
func (c *Cluster) Isolate(i int) {
	for j := range c.Nodes {
		if j != i {
			c.Cut(i, j)
			c.Cut(j, i)
		}
	}
	c.Log.Add("isolate node %d", i+1)
}

// Split cuts every link between the groups (a partition into sides).
func (c *Cluster) Split(sides ...[]int) {
	side := map[int]int{}
	for s, g := range sides {
		for _, i := range g {
			side[i] = s
		}
	}
	for i := range c.Nodes {
		for j := range c.Nodes {
			if i != j && side[i] != side[j] {
				c.Cut(i, j)
			}
		}
	}
	c.Log.Add("partition %v", plus1(sides))
}

// Bridge splits the cluster in two halves that can both reach node b (and
// b reaches both): the Jepsen "bridge" partition.
func (c *Cluster) Bridge(b int) {
	var left, right []int
	for i := range c.Nodes {
		if i == b {
			continue
		}
		if len(left) <= len(right) {
			left = append(left, i)
		} else {
			right = append(right, i)
		}
	}
	for _, i := range left {
		for _, j := range right {
			c.Cut(i, j)
			c.Cut(j, i)
		}
	}
	c.Log.Add("bridge through node %d: %v | %v", b+1, plus1([][]int{left}), plus1([][]int{right}))
}

// OneWay cuts every link out of node i (it hears the others, they never
// hear it).
func (c *Cluster) OneWay(i int) {
	for j := range c.Nodes {
		if j != i {
			c.Cut(i, j)
		}
	}
	c.Log.Add("one-way: node %d cannot send", i+1)
}

// Degrade sets every link to m (Delay or Flaky).
func (c *Cluster) Degrade(m Mode, delay time.Duration) {
	for _, row := range c.Links {
		for _, p := range row {
			if p != nil {
				p.Set(m, delay)
			}
		}
	}
	c.Log.Add("all links %s %v", m, delay)
}

func plus1(groups [][]int) string {
	s := ""
	for gi, g := range groups {
		if gi > 0 {
			s += " | "
		}
		for k, i := range g {
			if k > 0 {
				s += ","
			}
			s += fmt.Sprint(i + 1)
		}
	}
	return s
}
