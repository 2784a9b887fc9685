// Package nodetest starts real in-process Warden clusters for tests: real
// dragonboat NodeHosts on disk, real TCP on 127.0.0.1, with controls to stop,
// restart and find the leaders of nodes.
package nodetest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"testing"
	"time"

	"github.com/wardenlock/warden/lease"
	"github.com/wardenlock/warden/node"
)

// Options shape a cluster.
type Options struct {
	Nodes  int // default 3
	Shards int // default 2 (fast to start; tests that need more ask)
	Clock  lease.Clock
	Edit   func(*node.Config) // last word on each node's config
}

// Cluster is a running test cluster.
type Cluster struct {
	t     testing.TB
	Cfgs  []node.Config
	Nodes []*node.Node // nil while a node is stopped
	Gone  map[int]bool // nodes removed from the cluster (grow.go)
}

// Start starts a cluster and waits until every shard has a leader and the
// range table is installed. It is stopped when the test ends.
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Shards == 0 {
		o.Shards = 2
	}
	dir := t.TempDir()
	ports := FreePorts(t, 2*o.Nodes)
	var members []node.Member
	for i := 0; i < o.Nodes; i++ {
		members = append(members, node.Member{ID: uint64(i + 1), RaftAddr: ports[o.Nodes+i]})
	}
	c := &Cluster{t: t}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	for i := 0; i < o.Nodes; i++ {
		cfg := node.Config{
			ID: uint64(i + 1), DataDir: fmt.Sprintf("%s/node%d", dir, i+1),
			ClientAddr: ports[i], RaftAddr: ports[o.Nodes+i], Members: members,
			DataShards: o.Shards, Clock: o.Clock, Log: log,
		}
		if o.Edit != nil {
			o.Edit(&cfg)
		}
		c.Cfgs = append(c.Cfgs, cfg)
	}
	c.Nodes = make([]*node.Node, o.Nodes)
	for i := range c.Cfgs {
		c.StartNode(i)
	}
	t.Cleanup(c.StopAll)
	c.WaitReady(30 * time.Second)
	return c
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// FreePorts returns n distinct free 127.0.0.1 addresses, for servers a
// test starts later. They come from below the kernel's ephemeral port
// range, from which every outgoing connection on the machine takes its
// source port: a port picked inside it (as listening on port 0 does) can be
// taken by any connection between the pick and the server's bind, which on
// a busy machine running test packages side by side happens. Each call
// starts at a random port of that window, so test processes rarely probe
// the same ports.
func FreePorts(t testing.TB, n int) []string {
	lo, hi := PortWindow()
	if hi-lo < 4*n {
		return listenZero(t, n)
	}
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	span := hi - lo + 1
	first := rand.IntN(span)
	for i := 0; i < span && len(lns) < n; i++ {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", lo+(first+i)%span))
		if err == nil {
			lns = append(lns, ln)
		}
	}
	if len(lns) < n {
		t.Fatalf("only %d free ports in %d-%d", len(lns), lo, hi)
	}
	out := make([]string, n)
	for i, ln := range lns {
		out[i] = ln.Addr().String()
	}
	return out
}

// PortWindow is the range FreePorts picks from: from 10000 to just below
// the kernel's ephemeral ports.
func PortWindow() (lo, hi int) { return 10000, ephemeralStart() - 1 }

// ephemeralStart is the first port of the kernel's ephemeral range
// (Linux's default when it cannot be read).
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	var p int
	if err == nil {
		_, err = fmt.Sscan(string(b), &p)
	}
	if err != nil {
		return 32768
	}
	return p
}

// listenZero picks n ports by listening on port 0.
func listenZero(t testing.TB, n int) []string {
	var lns []net.Listener
	var out []string
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	for _, ln := range lns {
		ln.Close()
	}
	return out
}

// StartNode starts (or restarts) node i (0-based) from its data dir.
func (c *Cluster) StartNode(i int) {
	c.t.Helper()
	if c.Nodes[i] != nil {
		return
	}
	var err error
	for attempt := 0; attempt < 50; attempt++ {
		c.Nodes[i], err = node.Start(c.Cfgs[i])
		if err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond) // ports of a just-closed node may linger
	}
	c.t.Fatalf("start node %d: %v", i+1, err)
}

// StopNode stops node i (like a crash without losing fsynced data).
func (c *Cluster) StopNode(i int) {
	if n := c.Nodes[i]; n != nil {
		c.Nodes[i] = nil
		n.Close()
	}
}

// StopAll stops every node.
func (c *Cluster) StopAll() {
	for i := range c.Nodes {
		c.StopNode(i)
	}
}

// Endpoints returns the client addresses of the running nodes.
func (c *Cluster) Endpoints() []string {
	var out []string
	for i, n := range c.Nodes {
		if n != nil {
			out = append(out, c.Cfgs[i].ClientAddr)
		}
	}
	return out
}

// AllEndpoints returns every node's client address, running or not.
func (c *Cluster) AllEndpoints() []string {
	var out []string
	for _, cfg := range c.Cfgs {
		out = append(out, cfg.ClientAddr)
	}
	return out
}

// LeaderOf returns the index of the node leading a shard, or -1.
func (c *Cluster) LeaderOf(shardID uint64) int {
	for i, n := range c.Nodes {
		if n == nil {
			continue
		}
		if s, ok := n.Host.Shard(shardID); ok && s.IsLeader() {
			return i
		}
	}
	return -1
}

// ShardIDs returns the data shard ids (from the range table; replicas may
// have moved, so no node need hold them all).
func (c *Cluster) ShardIDs() []uint64 {
	for _, n := range c.Nodes {
		if n == nil {
			continue
		}
		if t := n.Host.Table(); t != nil {
			var ids []uint64
			for _, s := range t.Shards {
				ids = append(ids, s.ID)
			}
			return ids
		}
		return n.Host.ShardIDs()
	}
	return nil
}

// WaitReady waits until every running node has the table with all nodes
// registered, every shard has a leader, and each shard owns its ranges.
func (c *Cluster) WaitReady(timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := c.ready()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("cluster not ready after %v: %v", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *Cluster) ready() error {
	running := 0
	for _, n := range c.Nodes {
		if n != nil {
			running++
		}
	}
	for i, n := range c.Nodes {
		if n == nil {
			continue
		}
		t := n.Host.Table()
		if t == nil {
			return fmt.Errorf("node %d has no table", i+1)
		}
		if len(t.Nodes) < len(c.Nodes)-len(c.Gone) {
			return fmt.Errorf("node %d sees %d registered nodes", i+1, len(t.Nodes))
		}
	}
	for _, id := range c.ShardIDs() {
		if c.LeaderOf(id) < 0 {
			return fmt.Errorf("shard %d has no leader", id)
		}
		if err := c.shardOwnsRanges(id); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) shardOwnsRanges(id uint64) error {
	n := c.Nodes[c.LeaderOf(id)]
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ok, err := n.Host.OwnsRanges(ctx, id)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("shard %d does not own its ranges yet", id)
	}
	return nil
}
