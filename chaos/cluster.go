package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/router"
)

// Options shape a cluster of `warden serve` processes.
type Options struct {
	Nodes    int    // 3 or 5
	Shards   int    // data shards (default 4)
	Binary   string // path to bin/warden
	Dir      string // working directory: data dirs, logs
	Seed     int64
	Bugs     []string // WARDEN_TEST_BUGS switches for every node
	RTTms    int      // Raft tick (0: the serve default)
	LogLevel string   // node log level (default info)
	// SnapshotLogBytes, when set, is every node's --snapshot-log-bytes.
	SnapshotLogBytes string
}

// Node is one `warden serve` process and its addresses.
type Node struct {
	ID         int
	Dir        string
	ClientAddr string // real client port
	RaftAddr   string // real Raft port (--raft-listen)
	ClockFile  string // WARDEN_CLOCK_OFFSET_FILE
	LogPath    string

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	paused  bool
	running bool
}

// Cluster is a running set of node processes with a proxy on every
// directed Raft link.
type Cluster struct {
	Opts  Options
	Nodes []*Node
	// Links[i][j] is the directed Raft link from node i to node j (i ≠ j).
	Links [][]*Link
	// Inbound[j] is the proxy in front of node j's Raft port: every peer
	// dials it, and it sorts connections onto links by their sender.
	Inbound []*Proxy
	Log     *EventLog

	rng *lockedRand
}

// StartCluster launches the nodes and waits until every shard has a leader.
func StartCluster(ctx context.Context, o Options, log *EventLog) (*Cluster, error) {
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Shards == 0 {
		o.Shards = 4
	}
	if o.LogLevel == "" {
		o.LogLevel = "info"
	}
	c := &Cluster{Opts: o, Log: log, rng: newLockedRand(o.Seed)}
	// The nodes' ports stay reserved until the Raft proxies have bound
	// theirs: a proxy's ephemeral port must not be one a node is about to
	// listen on.
	ports, release, err := freePorts(2 * o.Nodes)
	if err != nil {
		return nil, err
	}
	defer release()
	for i := 0; i < o.Nodes; i++ {
		dir := filepath.Join(o.Dir, fmt.Sprintf("node%d", i+1))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		n := &Node{ID: i + 1, Dir: dir, ClientAddr: ports[i], RaftAddr: ports[o.Nodes+i],
			ClockFile: filepath.Join(dir, "clock-offset"), LogPath: filepath.Join(o.Dir, fmt.Sprintf("node%d.log", i+1))}
		if err := os.WriteFile(n.ClockFile, []byte("0\n"), 0o644); err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
	}
	c.Links = make([][]*Link, o.Nodes)
	for i := range c.Nodes {
		c.Links[i] = make([]*Link, o.Nodes)
		for j := range c.Nodes {
			if i != j {
				c.Links[i][j] = NewLink(fmt.Sprintf("raft %d→%d", i+1, j+1), o.Seed+int64(i*31+j))
			}
		}
	}
	byAddr := map[string]int{}
	for j, n := range c.Nodes {
		p, err := NewProxy(n.RaftAddr, raftClassifier(c.Links, j, byAddr))
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Inbound = append(c.Inbound, p)
		byAddr[p.Addr()] = j
	}
	release()
	for i := range c.Nodes {
		if err := c.Start(i); err != nil {
			c.Close()
			return nil, err
		}
	}
	if err := c.WaitHealthy(ctx, 60*time.Second); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// members is the member list: every node at its inbound proxy, which is
// also its Raft identity (--raft); it listens behind it (--raft-listen).
func (c *Cluster) members() string {
	var parts []string
	for j, n := range c.Nodes {
		parts = append(parts, fmt.Sprintf("%d=%s", n.ID, c.Inbound[j].Addr()))
	}
	return strings.Join(parts, ",")
}

// Start launches node i (fresh or on its existing data dir).
func (c *Cluster) Start(i int) error {
	n := c.Nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.running {
		return nil
	}
	args := []string{"serve", "--id", strconv.Itoa(n.ID), "--data-dir", filepath.Join(n.Dir, "data"),
		"--listen", n.ClientAddr, "--raft", c.Inbound[i].Addr(), "--raft-listen", n.RaftAddr,
		"--members", c.members(), "--shards", strconv.Itoa(c.Opts.Shards), "--log-level", c.Opts.LogLevel, "--plaintext"}
	if c.Opts.RTTms > 0 {
		args = append(args, "--rtt-ms", strconv.Itoa(c.Opts.RTTms))
	}
	if c.Opts.SnapshotLogBytes != "" {
		args = append(args, "--snapshot-log-bytes", c.Opts.SnapshotLogBytes)
	}
	lf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(lf, "=== %s start %v\n", time.Now().Format(time.RFC3339Nano), args)
	cmd := exec.Command(c.Opts.Binary, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Env = append(os.Environ(), "WARDEN_CLOCK_OFFSET_FILE="+n.ClockFile, "WARDEN_TEST_BUGS="+strings.Join(c.Opts.Bugs, ","))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); lf.Close(); close(exited) }()
	n.cmd, n.exited, n.running, n.paused = cmd, exited, true, false
	c.Log.Add("start node %d (pid %d)", n.ID, cmd.Process.Pid)
	return nil
}

// Kill sends SIGKILL to node i and waits for it to exit.
func (c *Cluster) Kill(i int) {
	n := c.Nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.running {
		return
	}
	n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.exited
	n.running, n.paused = false, false
	c.Log.Add("SIGKILL node %d", n.ID)
}

// Restart kills node i (if running) and starts it again on its data.
func (c *Cluster) Restart(i int) error {
	c.Kill(i)
	return c.Start(i)
}

// Pause sends SIGSTOP to node i.
func (c *Cluster) Pause(i int) {
	c.signal(i, syscall.SIGSTOP, true)
}

// Resume sends SIGCONT to node i.
func (c *Cluster) Resume(i int) {
	c.signal(i, syscall.SIGCONT, false)
}

func (c *Cluster) signal(i int, sig syscall.Signal, paused bool) {
	n := c.Nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.running || n.paused == paused {
		return
	}
	n.cmd.Process.Signal(sig)
	n.paused = paused
	c.Log.Add("%s node %d", sig, n.ID)
}

// Running reports whether node i is running (and not paused).
func (c *Cluster) Running(i int) bool {
	n := c.Nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.running && !n.paused
}

// SetClockOffset shifts node i's clock; the node reads the file every 100 ms.
func (c *Cluster) SetClockOffset(i int, d time.Duration) error {
	c.Log.Add("clock offset node %d = %v", i+1, d)
	tmp := c.Nodes[i].ClockFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(d.String()+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, c.Nodes[i].ClockFile)
}

// Close kills every node and stops the proxies.
func (c *Cluster) Close() {
	for i := range c.Nodes {
		c.Resume(i)
		c.Kill(i)
	}
	for _, p := range c.Inbound {
		p.Close()
	}
}

// ClientAddrs are the real client addresses of every node.
func (c *Cluster) ClientAddrs() []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.ClientAddr)
	}
	return out
}

// Status asks node i directly for its status.
func (c *Cluster) Status(ctx context.Context, i int) (router.Status, error) {
	var st router.Status
	if !c.Running(i) {
		return st, errors.New("chaos: node not running")
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	cl, err := client.New(ctx, []string{c.Nodes[i].ClientAddr}, client.WithPoolSize(1), client.WithDialTimeout(500*time.Millisecond),
		client.WithRequestTimeout(500*time.Millisecond))
	if err != nil {
		return st, err
	}
	defer cl.Close()
	raw, err := cl.Status(ctx)
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(raw, &st)
}

// Leader returns the index of the node that leads shard (by its own
// account, among running nodes), or -1.
func (c *Cluster) Leader(ctx context.Context, shard uint64) int {
	for i := range c.Nodes {
		st, err := c.Status(ctx, i)
		if err != nil {
			continue
		}
		for _, s := range st.Shards {
			if s.ID == shard && s.IsLeader {
				return i
			}
		}
	}
	return -1
}

// ShardOf returns the shard that owns path, as the cluster's range table says.
func (c *Cluster) ShardOf(ctx context.Context, path string) (uint64, error) {
	for i := range c.Nodes {
		if !c.Running(i) {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		cl, err := client.New(cctx, []string{c.Nodes[i].ClientAddr}, client.WithPoolSize(1))
		if err != nil {
			cancel()
			continue
		}
		rs, err := cl.Ranges(cctx)
		cl.Close()
		cancel()
		if err != nil || len(rs) == 0 {
			continue
		}
		t := &placement.Table{NamespaceDepth: 2, Ranges: rs}
		r, err := t.Locate(path)
		if err != nil {
			return 0, err
		}
		return r.Shard, nil
	}
	return 0, errors.New("chaos: no node answered the range table")
}

// WaitHealthy waits until every running node sees a leader for every data
// shard and all running nodes agree on who it is.
func (c *Cluster) WaitHealthy(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var last string
	for time.Now().Before(deadline) {
		if err := ctx.Err(); err != nil {
			return err
		}
		last = c.healthProblem(ctx)
		if last == "" {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("chaos: cluster not healthy after %v: %s", limit, last)
}

func (c *Cluster) healthProblem(ctx context.Context) string {
	leaders := map[uint64]map[uint64]bool{}
	running := 0
	for i := range c.Nodes {
		if !c.Running(i) {
			continue
		}
		running++
		st, err := c.Status(ctx, i)
		if err != nil {
			return fmt.Sprintf("node %d: %v", i+1, err)
		}
		if len(st.Shards) < c.Opts.Shards {
			return fmt.Sprintf("node %d knows %d shards", i+1, len(st.Shards))
		}
		for _, s := range st.Shards {
			if s.Leader == 0 {
				return fmt.Sprintf("node %d: shard %d has no leader", i+1, s.ID)
			}
			if leaders[s.ID] == nil {
				leaders[s.ID] = map[uint64]bool{}
			}
			leaders[s.ID][s.Leader] = true
		}
	}
	if running == 0 {
		return "no node running"
	}
	ids := make([]uint64, 0, len(leaders))
	for id := range leaders {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	for _, id := range ids {
		if len(leaders[id]) > 1 {
			return fmt.Sprintf("shard %d: nodes disagree on the leader %v", id, leaders[id])
		}
	}
	return ""
}

// freePorts picks n distinct free ports and keeps them bound until release
// is called (release may be called more than once).
func freePorts(n int) (ports []string, release func(), err error) {
	var lns []net.Listener
	release = func() {
		for _, l := range lns {
			l.Close()
		}
		lns = nil
	}
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			release()
			return nil, nil, err
		}
		lns = append(lns, l)
		ports = append(ports, l.Addr().String())
	}
	return ports, release, nil
}
