package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/wardenlock/warden/client"
)

// checkConverged waits until every node reports the same applied index for
// every shard and then compares each replica's lock table (read from the
// local replica with a stale read). It also checks that no shard is left
// without a leader.
func checkConverged(ctx context.Context, r *Result, c *Cluster) {
	if err := c.WaitHealthy(ctx, 30*time.Second); err != nil {
		r.violate("after healing: %v", err)
		return
	}
	deadline := time.Now().Add(20 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		last = appliedMismatch(ctx, c)
		if last == "" {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if last != "" {
		r.violate("replicas did not converge within 20s: %s", last)
		return
	}
	var ref string
	for i := range c.Nodes {
		table, err := lockTable(ctx, c.Nodes[i].ClientAddr)
		if err != nil {
			r.note("replica lock table of node %d unreadable: %v", i+1, err)
			continue
		}
		if ref == "" {
			ref = table
			continue
		}
		if table != ref {
			r.violate("replica lock tables differ after healing:\nnode 1:\n%s\nnode %d:\n%s", ref, i+1, table)
			return
		}
	}
	r.note("replicas converged (same applied index and lock table on every node)")
}

func appliedMismatch(ctx context.Context, c *Cluster) string {
	applied := map[uint64]map[uint64]bool{}
	for i := range c.Nodes {
		st, err := c.Status(ctx, i)
		if err != nil {
			return fmt.Sprintf("node %d: %v", i+1, err)
		}
		for _, s := range st.Shards {
			if applied[s.ID] == nil {
				applied[s.ID] = map[uint64]bool{}
			}
			applied[s.ID][s.Applied] = true
		}
	}
	for id, set := range applied {
		if len(set) > 1 {
			return fmt.Sprintf("shard %d applied indexes %v", id, set)
		}
	}
	return ""
}

// lockTable reads every lock from the node's local replicas.
func lockTable(ctx context.Context, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cl, err := client.New(ctx, []string{addr}, client.WithPoolSize(1))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	hs, err := cl.ListLocks(ctx, "/", client.WithStale())
	if err != nil {
		return "", err
	}
	var lines []string
	for _, h := range hs {
		lines = append(lines, fmt.Sprintf("%s lease=%d owner=%s mode=%d token=%d count=%d", h.Path, h.Lease, h.Owner, h.Mode, h.Token, h.Count))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n"), nil
}
