package chaos

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/wire"
)

// TestProbeFailover (manual, WARDEN_CHAOS_PROBE=kill|isolate): after hitting
// a shard leader, try an acquire through each surviving node separately and
// print what each answers, to see where failover time goes.
func TestProbeFailover(t *testing.T) {
	mode := os.Getenv("WARDEN_CHAOS_PROBE")
	if mode == "" {
		t.Skip("set WARDEN_CHAOS_PROBE=kill or isolate")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	log := NewEventLog(testLogWriter{t})
	c, err := StartCluster(ctx, Options{Nodes: 3, Binary: wardenBin, Dir: testDir(t), Seed: 1}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	path := "/probe/x/lock"
	shard, _ := c.ShardOf(ctx, path)
	var cls []*client.Client
	for i := range c.Nodes {
		eps := []string{c.Nodes[i].ClientAddr}
		if os.Getenv("WARDEN_CHAOS_PROBE_ALL") != "" {
			eps = c.ClientAddrs() // one client over all endpoints, like the figures
		}
		cl, err := client.New(ctx, eps, client.WithPoolSize(len(eps)), client.WithRequestTimeout(300*time.Millisecond),
			client.WithBackoff(5*time.Millisecond, 50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		cls = append(cls, cl)
	}
	for trial := 0; trial < 4; trial++ {
		leader := c.Leader(ctx, shard)
		fmt.Printf("--- trial %d\n", trial)
		start := time.Now()
		if mode == "kill" {
			c.Kill(leader)
		} else {
			c.Isolate(leader)
		}
		fmt.Printf("hit node %d (leader of shard %d)\n", leader+1, shard)
		okAt := map[int]time.Duration{}
		for time.Since(start) < 20*time.Second && len(okAt) < len(c.Nodes)-1 {
			for i, cl := range cls {
				if i == leader || okAt[i] != 0 {
					continue
				}
				actx, acancel := context.WithTimeout(ctx, 400*time.Millisecond)
				r, err := cl.Do(actx, &wire.Request{Op: wire.OpAcquire, Path: path, TTL: 5000, Wait: wire.WaitNone})
				acancel()
				el := time.Since(start).Round(time.Millisecond)
				if err == nil {
					okAt[i] = el
					fmt.Printf("%v via node %d: OK token %d\n", el, i+1, r.Token)
					cl.Do(ctx, &wire.Request{Op: wire.OpRelease, Path: path, Token: r.Token, Lease: r.Lease})
					continue
				}
				fmt.Printf("%v via node %d: %v\n", el, i+1, err)
			}
			st := ""
			t1 := time.Now()
			for i := range c.Nodes {
				if s, err := c.Status(ctx, i); err == nil {
					for _, sh := range s.Shards {
						if sh.ID == shard {
							st += fmt.Sprintf(" n%d:leader=%d", i+1, sh.Leader)
						}
					}
				}
			}
			fmt.Printf("   status:%s (%v)\n", st, time.Since(t1).Round(time.Millisecond))
		}
		c.Heal()
		for i := range c.Nodes {
			c.Start(i)
		}
		if err := c.WaitHealthy(ctx, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
}
