package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/wardenlock/warden/internal/linmodel"
)

// Fault names a nemesis. Each is injected repeatedly during the fault
// window: on for a few seconds, then healed.
type Fault string

const (
	KillLeader      Fault = "kill-leader"      // SIGKILL the leader of a workload shard, restart it
	PartitionLeader Fault = "partition-leader" // isolate that leader
	PauseLeader     Fault = "pause-leader"     // SIGSTOP/SIGCONT that leader
	KillNode        Fault = "kill-node"        // SIGKILL a random node, restart it
	MajorityMinor   Fault = "majority"         // split into a majority and a minority
	Bridge          Fault = "bridge"           // two halves that both see one node
	OneWay          Fault = "one-way"          // a node that hears but is not heard
	DelayLinks      Fault = "delay"            // every Raft link 40 ms slower
	FlakyLinks      Fault = "flaky"            // connections reset at random
	ClockSkew       Fault = "clock"            // per-node clock offsets (constant while a node leads)
	RestartAll      Fault = "restart-all"      // SIGKILL every node, restart them all
	PauseClient     Fault = "pause-client"     // SIGSTOP a lock-set client process holding the lock
	KillOrPause     Fault = "kill-or-pause"    // each time one of kill-leader, pause-leader, kill-node
	None            Fault = "none"
)

// AllFaults is the full schedule's fault list.
var AllFaults = []Fault{KillLeader, PartitionLeader, PauseLeader, KillNode, MajorityMinor, Bridge, OneWay,
	DelayLinks, FlakyLinks, ClockSkew, RestartAll, PauseClient}

// Workload names.
const (
	WRegister = "register"
	WFenced   = "fenced-set"
	WLeases   = "leases"
	WWatch    = "watch"
	WElection = "election"
	WHolds    = "holds"
)

// Scenario is one run: a cluster, some workloads, one fault.
type Scenario struct {
	Name      string
	Nodes     int
	Fault     Fault
	Workloads []string
	Window    time.Duration // fault window (workloads run through it)
	// ShardChurn creates and retires data shards through the fault window
	// (shards.go).
	ShardChurn bool
	// Compact makes every replica snapshot and compact its log every
	// compactBytes of entries, so the fault meets snapshot saves, log
	// compactions and replicas that come back behind the compacted log and
	// must install a snapshot.
	Compact bool
}

// compactBytes is the log a Compact scenario's replicas snapshot at (the
// smallest --snapshot-log-bytes): a snapshot every few hundred entries of
// the workloads.
const compactBytes = "64KiB"

// Env is what every scenario shares.
type Env struct {
	Binary    string
	ReportDir string // where failed runs leave their report folders
	Seed      int64
	Bugs      []string
	Out       io.Writer // progress (may be nil)
	// ClientCmd starts a lock-set client process (for PauseClient): argv
	// of `warden-chaos client`; empty: in-process clients only.
	ClientCmd []string
}

func (sc Scenario) has(w string) bool {
	for _, x := range sc.Workloads {
		if x == w {
			return true
		}
	}
	return false
}

// Run runs the scenario and checks every promise its workloads cover.
func Run(ctx context.Context, sc Scenario, env Env) *Result {
	r := &Result{Name: sc.Name, Seed: env.Seed, Nodes: sc.Nodes, Bugs: env.Bugs}
	out := env.Out
	if out == nil {
		out = io.Discard
	}
	work, err := os.MkdirTemp("", "warden-chaos-run-")
	if err != nil {
		r.violate("harness: %v", err)
		return r
	}
	if os.Getenv(KeepEnv) != "" {
		fmt.Fprintf(out, "[%s] work dir (kept): %s\n", sc.Name, work)
	}
	log := NewEventLog(prefixWriter{out, sc.Name})
	opts := Options{Nodes: sc.Nodes, Binary: env.Binary, Dir: work, Seed: env.Seed, Bugs: env.Bugs}
	if sc.Compact {
		opts.SnapshotLogBytes = compactBytes
	}
	c, err := StartCluster(ctx, opts, log)
	if err != nil {
		r.violate("harness: start cluster: %v", err)
		return r
	}
	defer func() {
		c.Close()
		switch {
		case r.Failed():
		case os.Getenv(KeepEnv) == "":
			os.RemoveAll(work)
		default:
			removeDataDirs(work) // the node logs are what a kept run is for
		}
	}()
	hist := linmodel.NewHistory(log.Now)
	reg := &linmodel.Register{Clients: 4, Rate: 20 * time.Millisecond, Hist: hist}
	leases := &Leases{Pairs: 2, TTL: 2 * time.Second, Clock: log.Now}
	fenced, err := newFencedRun(c, env, sc)
	if err != nil {
		r.violate("harness: %v", err)
		return r
	}
	defer fenced.close()

	wctx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	var wg sync.WaitGroup
	start := func(name string, f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil && wctx.Err() == nil {
				r.note("%s: %v", name, err)
			}
		}()
	}
	if sc.has(WRegister) {
		start(WRegister, func() error { return runRegister(wctx, reg, c, env.Seed) })
	}
	if sc.has(WLeases) {
		start(WLeases, func() error { return leases.Run(wctx, c, env.Seed) })
	}
	if sc.has(WFenced) {
		start(WFenced, func() error { return fenced.run(wctx) })
	}
	var ew *electionRun
	if sc.has(WElection) {
		ew = &electionRun{}
		start(WElection, func() error { return ew.run(wctx, c, env.Seed) })
	}
	var ww *watchRun
	if sc.has(WWatch) {
		ww = &watchRun{}
		start(WWatch, func() error { return ww.run(wctx, c) })
	}
	holds := &Holds{Workers: 6, TTL: 3 * time.Second, Bound: 3 * time.Second, Clock: log.Now}
	if sc.has(WHolds) {
		start(WHolds, func() error { return holds.Run(wctx, c, env.Seed) })
	}

	sleepCtx(ctx, 2*time.Second) // warm-up
	churn := &shardChurn{}
	if sc.ShardChurn {
		start("shards", func() error { return churn.run(wctx, c, sc.Window) })
	}
	nem := &nemesis{c: c, rng: rand.New(rand.NewSource(env.Seed)), fenced: fenced, paths: targetShardPaths}
	if sc.has(WHolds) {
		nem.paths = append(append([]string(nil), targetShardPaths...), HoldsPaths[0])
	}
	nem.run(ctx, sc.Fault, sc.Window)
	nem.healAll(ctx)
	if err := c.WaitHealthy(ctx, 30*time.Second); err != nil {
		r.violate("no leader after healing: %v", err)
	}
	sleepCtx(ctx, 3*time.Second) // a clean stretch: everything must work again
	stopWork()
	wg.Wait()

	if sc.has(WRegister) {
		ops, unk := reg.Stats()
		r.note("register: %d operations, %d with unknown outcome", ops, unk)
		checkRegister(r, hist, log, filepath.Join(env.ReportDir, reportName(sc, env)), 2*time.Minute)
	}
	if sc.has(WFenced) {
		fenced.check(r)
	}
	if sc.has(WLeases) {
		for _, v := range leases.Violations() {
			r.violate("leases: %s", v)
		}
		r.note("leases: %d rounds", leases.Rounds())
		for _, f := range leases.TakerFailures() {
			r.note("leases: a taker's wait failed (not a promise by itself): %s", f)
		}
	}
	if ew != nil {
		ew.check(r)
	}
	if ww != nil {
		ww.check(ctx, r, c)
	}
	if sc.has(WHolds) {
		checkHolds(ctx, r, c, holds)
	}
	if sc.ShardChurn {
		churn.check(ctx, r, c)
	}
	if sc.Compact {
		checkSnapshots(ctx, r, c)
	}
	checkConverged(ctx, r, c)
	if r.Failed() {
		writeReport(r, filepath.Join(env.ReportDir, reportName(sc, env)), c, log,
			map[string]any{"register-history": hist, "fenced": fenced.summary()})
	}
	return r
}

// checkSnapshots notes the snapshots every running node's data shard
// replicas saved and recovered from since they last started, and fails a
// Compact scenario in which none was saved: it did not test what it is for.
func checkSnapshots(ctx context.Context, r *Result, c *Cluster) {
	var saved, recovered uint64
	for i := range c.Nodes {
		st, err := c.Status(ctx, i)
		if err != nil {
			continue // counted on the nodes that answer
		}
		for _, sh := range st.Shards {
			saved += sh.SnapshotsSaved
			recovered += sh.SnapshotsRecovered
		}
	}
	r.note("snapshots: %d saved, %d recovered from (data shard replicas, since each node's last start)", saved, recovered)
	if saved == 0 {
		r.violate("snapshots: no replica saved one: the log-size bound (%s) never fired", compactBytes)
	}
}

func reportName(sc Scenario, env Env) string {
	name := fmt.Sprintf("%s-seed%d", strings.ReplaceAll(sc.Name, "/", "_"), env.Seed)
	if len(env.Bugs) > 0 {
		name += "-bugs-" + strings.Join(env.Bugs, "+")
	}
	return name
}

type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (p prefixWriter) Write(b []byte) (int, error) {
	fmt.Fprintf(p.w, "[%s] %s", p.prefix, b)
	return len(b), nil
}

// KeepEnv, when set, keeps a passing run's work directory with its node
// logs (the nodes' data directories, some 100 MB each, are removed): with
// WARDEN_LEASE_TRACE it lets passing runs be searched for lessor decisions
// that broke or came close to breaking a promise.
const KeepEnv = "WARDEN_CHAOS_KEEP"

// removeDataDirs removes the subdirectories of a run's work directory (the
// nodes' data) and keeps its files (the node logs).
func removeDataDirs(work string) {
	entries, _ := os.ReadDir(work)
	for _, e := range entries {
		if e.IsDir() {
			os.RemoveAll(filepath.Join(work, e.Name()))
		}
	}
}

// nemesis injects one kind of fault repeatedly.
type nemesis struct {
	c      *Cluster
	rng    *rand.Rand
	fenced *fencedRun
	paths  []string // whose shards' leaders the leader faults hit
	killed []int
}

// targetShardPaths are paths whose shards' leaders the leader faults hit.
var targetShardPaths = []string{"/reg/r0", "/reg/r1", "/set/s0", "/lease/p0"}

func (n *nemesis) leader(ctx context.Context) int {
	p := n.paths[n.rng.Intn(len(n.paths))]
	shard, err := n.c.ShardOf(ctx, p)
	if err != nil {
		return n.rng.Intn(len(n.c.Nodes))
	}
	if l := n.c.Leader(ctx, shard); l >= 0 {
		return l
	}
	return n.rng.Intn(len(n.c.Nodes))
}

func (n *nemesis) run(ctx context.Context, f Fault, window time.Duration) {
	end := time.Now().Add(window)
	for time.Now().Before(end) && ctx.Err() == nil {
		n.inject(ctx, f)
		sleepCtx(ctx, time.Duration(2000+n.rng.Intn(1500))*time.Millisecond)
		n.healAll(ctx)
		sleepCtx(ctx, time.Duration(1500+n.rng.Intn(1500))*time.Millisecond)
	}
}

func (n *nemesis) inject(ctx context.Context, f Fault) {
	c := n.c
	switch f {
	case None:
	case KillLeader:
		l := n.leader(ctx)
		c.Kill(l)
		n.killed = append(n.killed, l)
	case KillNode:
		l := n.rng.Intn(len(c.Nodes))
		c.Kill(l)
		n.killed = append(n.killed, l)
	case PartitionLeader:
		c.Isolate(n.leader(ctx))
	case PauseLeader:
		c.Pause(n.leader(ctx))
	case MajorityMinor:
		perm := n.rng.Perm(len(c.Nodes))
		k := len(c.Nodes)/2 + 1
		c.Split(perm[:k], perm[k:])
	case Bridge:
		c.Bridge(n.rng.Intn(len(c.Nodes)))
	case OneWay:
		c.OneWay(n.leader(ctx))
	case DelayLinks:
		c.Degrade(Delay, 40*time.Millisecond)
	case FlakyLinks:
		c.Degrade(Flaky, 0)
	case ClockSkew:
		// Offsets change only while a node is down (a running clock never
		// jumps): the leader is killed and comes back skewed, and another
		// node, with another offset, takes over its leases.
		l := n.leader(ctx)
		c.Kill(l)
		c.SetClockOffset(l, time.Duration(n.rng.Intn(7200)-3600)*time.Second)
		n.killed = append(n.killed, l)
	case RestartAll:
		for i := range c.Nodes {
			c.Kill(i)
		}
		for i := range c.Nodes {
			c.Start(i)
		}
	case PauseClient:
		n.fenced.pauseOne(n.rng)
	case KillOrPause:
		n.inject(ctx, []Fault{KillLeader, PauseLeader, KillNode}[n.rng.Intn(3)])
	}
}

func (n *nemesis) healAll(ctx context.Context) {
	c := n.c
	c.Heal()
	for i := range c.Nodes {
		c.Resume(i)
	}
	for _, i := range n.killed {
		c.Start(i)
	}
	n.killed = nil
	if n.fenced != nil {
		n.fenced.resumeAll()
	}
}
