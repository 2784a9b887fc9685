package chaos

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/wire"
)

// Figures measures recovery times on a healthy cluster.
type Figures struct {
	KillLeader    []time.Duration // SIGKILL of a shard leader → first successful acquire on that shard
	IsolateLeader []time.Duration // isolation of a shard leader → first successful acquire
	HandOff       []time.Duration // SIGKILL of a `warden lock` holder → a waiter granted
	HandOffTTL    time.Duration
}

// MeasureFigures runs trials of each measurement.
func MeasureFigures(ctx context.Context, c *Cluster, trials int) (*Figures, error) {
	f := &Figures{HandOffTTL: time.Second}
	cl, err := client.New(ctx, c.ClientAddrs(), client.WithRequestTimeout(300*time.Millisecond),
		client.WithBackoff(5*time.Millisecond, 50*time.Millisecond), client.WithPoolSize(len(c.Nodes)))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	for t := 0; t < trials && ctx.Err() == nil; t++ {
		path := fmt.Sprintf("/fig/k%d", t)
		d, err := failover(ctx, c, cl, path, func(i int) { c.Kill(i) })
		c.Log.Add("figures trial %d: kill leader → acquire %v (%v)", t, d, err)
		if err == nil {
			f.KillLeader = append(f.KillLeader, d)
		}
		c.Heal()
		for i := range c.Nodes {
			c.Start(i)
		}
		if err := c.WaitHealthy(ctx, 30*time.Second); err != nil {
			return f, err
		}
		path = fmt.Sprintf("/fig/i%d", t)
		d, err = failover(ctx, c, cl, path, func(i int) { c.Isolate(i) })
		c.Log.Add("figures trial %d: isolate leader → acquire %v (%v)", t, d, err)
		if err == nil {
			f.IsolateLeader = append(f.IsolateLeader, d)
		}
		c.Heal()
		if err := c.WaitHealthy(ctx, 30*time.Second); err != nil {
			return f, err
		}
		d, err = handOff(ctx, c, cl, fmt.Sprintf("/fig/h%d/lock", t), f.HandOffTTL)
		c.Log.Add("figures trial %d: holder kill → hand-off %v (%v)", t, d, err)
		if err == nil {
			f.HandOff = append(f.HandOff, d)
		}
	}
	return f, nil
}

// failover hits the leader of base's shard and times the first acquire that
// succeeds afterwards. Every attempt takes a path of its own in base's
// namespace (same shard): an attempt that timed out may still have been
// granted, and must not make the next ones conflict.
func failover(ctx context.Context, c *Cluster, cl *client.Client, base string, hit func(int)) (time.Duration, error) {
	shard, err := c.ShardOf(ctx, base)
	if err != nil {
		return 0, err
	}
	if err := acquireRelease(ctx, cl, base+"/warm"); err != nil { // warm the routes
		return 0, err
	}
	leader := c.Leader(ctx, shard)
	if leader < 0 {
		return 0, fmt.Errorf("no leader for shard %d", shard)
	}
	start := time.Now()
	hit(leader)
	c.Log.Add("figures: node %d hit in %v", leader+1, time.Since(start).Round(time.Millisecond))
	deadline := start.Add(30 * time.Second)
	errs := map[string]int{}
	for attempt := 0; time.Now().Before(deadline); attempt++ {
		t0 := time.Now()
		err := acquireRelease(ctx, cl, fmt.Sprintf("%s/a%d", base, attempt))
		if err == nil {
			return time.Since(start), nil
		}
		errs[err.Error()]++
		// Where failover time goes: each failed attempt, when it began and
		// what it got (in the event log only).
		c.Log.Add("figures: attempt %d at %v took %v: %v", attempt, t0.Sub(start).Round(time.Millisecond),
			time.Since(t0).Round(time.Millisecond), err)
	}
	return 0, fmt.Errorf("no acquire on %s (shard %d, node %d hit) within 30s: %v; %s", base, shard, leader+1, errs, c.diagnose(ctx, shard, base))
}

func acquireRelease(ctx context.Context, cl *client.Client, path string) error {
	actx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	r, err := cl.Do(actx, &wire.Request{Op: wire.OpAcquire, Path: path, TTL: 5000, Wait: wire.WaitNone})
	if err != nil {
		return err
	}
	rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
	defer rcancel()
	cl.Do(rctx, &wire.Request{Op: wire.OpRelease, Path: path, Token: r.Token, Lease: r.Lease})
	return nil
}

// handOff starts `warden lock --ttl T path -- sleep 60`, parks a waiter,
// SIGKILLs the holder and times the waiter's grant. The grant can come no
// sooner than T after the holder's last keepalive.
func handOff(ctx context.Context, c *Cluster, cl *client.Client, path string, ttl time.Duration) (time.Duration, error) {
	cmd := exec.Command(c.Opts.Binary, "lock", "--endpoints", strings.Join(c.ClientAddrs(), ","), "--ttl", ttl.String(), path, "--", "sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out lockedBuffer // what the holder said, for a failed trial's error
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 200 * time.Millisecond // its `sleep` child may hold the pipe after the kill
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	// Wait until it holds the lock.
	deadline := time.Now().Add(10 * time.Second)
	for {
		lctx, lcancel := context.WithTimeout(ctx, time.Second)
		li, err := cl.LockInfo(lctx, path)
		lcancel()
		if err == nil && len(li.Holders) > 0 {
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the lock holder never got %s (lockinfo: %v; holder's output: %q)", path, err, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	granted := make(chan time.Time, 1)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	go func() {
		r, err := cl.Do(wctx, &wire.Request{Op: wire.OpAcquire, Path: path, TTL: 5000, Wait: wire.WaitForever})
		if err == nil {
			granted <- time.Now()
			cl.Do(context.Background(), &wire.Request{Op: wire.OpRelease, Path: path, Token: r.Token, Lease: r.Lease})
		}
		close(granted)
	}()
	time.Sleep(200 * time.Millisecond)
	select {
	case <-granted: // the holder lost its lease on its own (a starved keepalive)
		return 0, fmt.Errorf("the waiter on %s was granted before the holder was killed", path)
	default:
	}
	start := time.Now()
	cmd.Process.Signal(syscall.SIGKILL)
	at, ok := <-granted
	if !ok {
		return 0, fmt.Errorf("waiter on %s never granted", path)
	}
	return at.Sub(start), nil
}

// lockedBuffer is an io.Writer for a child's output, read while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Percentile returns the p-th percentile (0..100) of ds.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}

// String formats the figures for the results file.
func (f *Figures) String() string {
	var b strings.Builder
	row := func(name string, ds []time.Duration) {
		fmt.Fprintf(&b, "%-44s n=%-3d p50=%-8v p99=%-8v max=%v\n", name, len(ds),
			Percentile(ds, 50).Round(time.Millisecond), Percentile(ds, 99).Round(time.Millisecond), Percentile(ds, 100).Round(time.Millisecond))
	}
	row("leader SIGKILL → first acquire on its shard", f.KillLeader)
	row("leader isolated → first acquire on its shard", f.IsolateLeader)
	row(fmt.Sprintf("holder SIGKILL → waiter granted (TTL %v)", f.HandOffTTL), f.HandOff)
	return b.String()
}

// diagnose says how each node sees a shard, and whether an acquire through
// each node alone succeeds.
func (c *Cluster) diagnose(ctx context.Context, shard uint64, base string) string {
	var b strings.Builder
	for i := range c.Nodes {
		st, err := c.Status(ctx, i)
		if err != nil {
			fmt.Fprintf(&b, "node %d: %v; ", i+1, err)
			continue
		}
		for _, s := range st.Shards {
			if s.ID == shard {
				fmt.Fprintf(&b, "node %d: leader=%d applied=%d", i+1, s.Leader, s.Applied)
			}
		}
		cl, err := client.New(ctx, []string{c.Nodes[i].ClientAddr}, client.WithPoolSize(1), client.WithRequestTimeout(time.Second))
		if err == nil {
			actx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err = cl.Do(actx, &wire.Request{Op: wire.OpAcquire, Path: base + "/diag", TTL: 5000, Wait: wire.WaitNone})
			cancel()
			cl.Close()
		}
		fmt.Fprintf(&b, " direct acquire: %v; ", err)
	}
	return b.String()
}
