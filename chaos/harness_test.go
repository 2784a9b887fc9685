package chaos

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/wardenlock/warden/client"
)

var wardenBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "warden-chaos-bin")
	if err != nil {
		panic(err)
	}
	wd, _ := os.Getwd()
	wardenBin, err = BuildBinary(wd, dir)
	if err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestPerLinkProxiesCarryRaft checks the harness's premise: each node dials
// its peers through its own per-link proxies, and cutting a node's links
// makes the others elect a new leader while writes keep working.
func TestPerLinkProxiesCarryRaft(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	log := NewEventLog(testLogWriter{t})
	c, err := StartCluster(ctx, Options{Nodes: 3, Shards: 2, Binary: wardenBin, Dir: testDir(t), Seed: 1}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Raft connections are one-way and opened on first use: a link carries
	// bytes once its dialler has sent something to that peer (votes at the
	// first elections, then heartbeats of the shards it leads once the
	// leader balancer has spread leaderships over the nodes).
	silent := func() []string {
		var out []string
		for i, row := range c.Links {
			for j, p := range row {
				if p != nil && p.Bytes() == 0 {
					out = append(out, fmt.Sprintf("%d→%d", i+1, j+1))
				}
			}
		}
		return out
	}
	for wait := time.Now().Add(30 * time.Second); len(silent()) > 0 && time.Now().Before(wait); {
		time.Sleep(100 * time.Millisecond)
	}
	if s := silent(); len(s) > 0 {
		t.Errorf("links that carried no bytes in 30 s: %v", s)
	}
	cl, err := client.New(ctx, c.ClientAddrs())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Put(ctx, "/t/a/x", []byte("1")); err != nil {
		t.Fatal(err)
	}
	shard, err := c.ShardOf(ctx, "/t/a/x")
	if err != nil {
		t.Fatal(err)
	}
	leader := c.Leader(ctx, shard)
	if leader < 0 {
		t.Fatal("no leader")
	}
	c.Isolate(leader)
	deadline := time.Now().Add(20 * time.Second)
	for {
		l := c.Leader(ctx, shard)
		if l >= 0 && l != leader {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("shard %d: no new leader after isolating node %d", shard, leader+1)
		}
		time.Sleep(50 * time.Millisecond)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if _, err := cl.Put(wctx, "/t/a/x", []byte("2")); err != nil {
		t.Fatal(err)
	}
	c.Heal()
	if err := c.WaitHealthy(ctx, 20*time.Second); err != nil {
		t.Fatal(err)
	}
}

type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// testDir is a working directory kept after a failed test (node logs).
func testDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "warden-chaos-"+t.Name()+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("WARDEN_CHAOS_KEEP") != "" {
			t.Logf("kept %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}
