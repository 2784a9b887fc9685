// Package harness starts server processes on 127.0.0.1 for load tests: a
// Warden cluster of any size here (each node optionally in its own
// CPU-limited cgroup), its peers in loadtest/peers. Every process
// runs in its own process group under a deadline and is killed on Stop.
package harness

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Proc is one server process.
type Proc struct {
	Name string
	Cmd  *exec.Cmd
	Log  string
	done chan struct{}
}

// Start runs argv with its output in logPath. The process is killed when ctx
// ends, so every start is bounded by its caller's deadline.
func Start(ctx context.Context, name, logPath string, env []string, argv ...string) (*Proc, error) {
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("harness: start %s: %w", name, err)
	}
	p := &Proc{Name: name, Cmd: cmd, Log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); lf.Close(); close(p.done) }()
	go func() {
		select {
		case <-ctx.Done():
			p.Stop()
		case <-p.done:
		}
	}()
	return p, nil
}

// PID is the process id.
func (p *Proc) PID() int { return p.Cmd.Process.Pid }

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM to the process group, then SIGKILL after 5 seconds.
func (p *Proc) Stop() {
	if p.Exited() {
		return
	}
	_ = syscall.Kill(-p.PID(), syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
		<-p.done
	}
}

// Tail returns the last lines of the process's log, for error messages.
func (p *Proc) Tail() string {
	b, _ := os.ReadFile(p.Log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-8):], "\n")
}

// Group is a set of processes stopped together.
type Group struct {
	Procs []*Proc
	Dir   string // temp dir removed on Stop
	// CPU holds each process's CPU limit (same order as Procs) when the
	// group was started with one; removed on Stop.
	CPU []*CPULimit
}

// PIDs lists the processes' ids.
func (g *Group) PIDs() []int {
	var out []int
	for _, p := range g.Procs {
		out = append(out, p.PID())
	}
	return out
}

// Stop stops every process and removes the temp dir.
func (g *Group) Stop() {
	for _, p := range g.Procs {
		p.Stop()
	}
	for _, l := range g.CPU {
		if err := l.Remove(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	g.CPU = nil
	if g.Dir != "" {
		_ = os.RemoveAll(g.Dir)
	}
}

// WaitTCP waits until every address accepts connections or a process exits.
func (g *Group) WaitTCP(ctx context.Context, addrs []string) error {
	for _, a := range addrs {
		for {
			c, err := net.DialTimeout("tcp", a, 200*time.Millisecond)
			if err == nil {
				c.Close()
				break
			}
			for _, p := range g.Procs {
				if p.Exited() {
					return fmt.Errorf("harness: %s exited:\n%s", p.Name, p.Tail())
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("harness: %s not listening: %w", a, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// Ports are 127.0.0.1 ports from base on.
func Ports(base, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("127.0.0.1:%d", base+i)
	}
	return out
}

// WardenOptions shape a local Warden cluster.
type WardenOptions struct {
	Binary   string   // bin/warden
	Nodes    int      // node processes (default 3)
	Shards   int      // data shards a new cluster starts with (0: the node's default)
	Replicas int      // replicas per data shard (0: on every node)
	BasePort int      // clients on BasePort.., Raft on BasePort+100.., pprof on BasePort+200..
	Verb     string   // "serve" (default) or "bench node" (adds pprof)
	Args     []string // more flags for every node (e.g. --no-audit)
	TLSDir   string   // --tls-dir for every node (a `warden certs` directory); "" = --plaintext
	Env      []string // more environment for every node (e.g. GODEBUG=gctrace=1)
	// NodeArgs, when set, gives flags for node i (from 0) only, e.g. its
	// own admin port.
	NodeArgs func(i int) []string
	// CPUCores > 0 puts every node in its own cgroup limited to that many
	// CPUs, enforced every CPUPeriod (default 10 ms): each node then has
	// a machine's fixed CPU budget (NewCPULimit).
	CPUCores  float64
	CPUPeriod time.Duration
	// CPUWeight > 0 gives each node's cgroup that many times an ordinary
	// process's CPU weight (CPULimit.SetWeight).
	CPUWeight float64
}

// StartWarden starts o.Nodes Warden nodes as processes and returns their
// client endpoints once they listen.
func StartWarden(ctx context.Context, o WardenOptions) (*Group, []string, error) {
	if o.Nodes <= 0 {
		o.Nodes = 3
	}
	if o.CPUPeriod <= 0 {
		o.CPUPeriod = 10 * time.Millisecond
	}
	dir, err := os.MkdirTemp("", "warden-bench-")
	if err != nil {
		return nil, nil, err
	}
	g := &Group{Dir: dir}
	clients, raft := Ports(o.BasePort, o.Nodes), Ports(o.BasePort+100, o.Nodes)
	var members []string
	for i, r := range raft {
		members = append(members, fmt.Sprintf("%d=%s", i+1, r))
	}
	verb := strings.Fields(o.Verb)
	if len(verb) == 0 {
		verb = []string{"serve"}
	}
	for i := 0; i < o.Nodes; i++ {
		argv := append([]string{o.Binary}, verb...)
		argv = append(argv, "--id", fmt.Sprint(i+1), "--data-dir", filepath.Join(dir, fmt.Sprintf("node%d", i+1)),
			"--listen", clients[i], "--raft", raft[i], "--members", strings.Join(members, ","))
		if o.Shards > 0 {
			argv = append(argv, "--shards", fmt.Sprint(o.Shards))
		}
		if o.TLSDir != "" {
			argv = append(argv, "--tls-dir", o.TLSDir)
		} else {
			argv = append(argv, "--plaintext")
		}
		if o.Replicas > 0 {
			argv = append(argv, "--replicas", fmt.Sprint(o.Replicas))
		}
		if len(verb) > 1 {
			argv = append(argv, "--pprof", fmt.Sprintf("127.0.0.1:%d", o.BasePort+200+i))
		}
		argv = append(argv, o.Args...)
		if o.NodeArgs != nil {
			argv = append(argv, o.NodeArgs(i)...)
		}
		var limit *CPULimit
		if o.CPUCores > 0 {
			if limit, err = NewCPULimit(fmt.Sprintf("node%d", i+1), o.CPUCores, o.CPUPeriod); err != nil {
				g.Stop()
				return nil, nil, err
			}
			g.CPU = append(g.CPU, limit)
			if o.CPUWeight > 0 {
				if err := limit.SetWeight(o.CPUWeight); err != nil {
					g.Stop()
					return nil, nil, err
				}
			}
		}
		p, err := Start(ctx, fmt.Sprintf("warden%d", i+1), filepath.Join(dir, fmt.Sprintf("node%d.log", i+1)), o.Env, argv...)
		if err != nil {
			g.Stop()
			return nil, nil, err
		}
		g.Procs = append(g.Procs, p)
		if limit != nil {
			// The process ran unlimited for the moment since its start;
			// from here on every thread of it is inside the quota.
			if err := limit.Add(p.PID()); err != nil {
				g.Stop()
				return nil, nil, err
			}
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := g.WaitTCP(wctx, clients); err != nil {
		g.Stop()
		return nil, nil, err
	}
	return g, clients, nil
}
