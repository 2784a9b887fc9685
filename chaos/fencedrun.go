package chaos

import (
	"bufio"
	"context"
	"fmt"
	"math/rand"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// fencedRun is the lock-set workload: in-process clients, plus client
// processes (which the PauseClient fault stops with SIGSTOP while they may
// hold the lock), all adding to the same lists through the fenced oracle.
type fencedRun struct {
	c       *Cluster
	env     Env
	oracle  *Oracle
	paths   []string
	procs   bool
	mu      sync.Mutex
	acked   map[string]string // element → path
	rejects []string
	cmds    []*exec.Cmd
	paused  map[int]bool
	links   []*ClientLinks
}

func newFencedRun(c *Cluster, env Env, sc Scenario) (*fencedRun, error) {
	o, err := NewOracle()
	if err != nil {
		return nil, err
	}
	return &fencedRun{c: c, env: env, oracle: o, paths: []string{"/set/s0/lock", "/set/s1/lock"},
		procs: sc.Fault == PauseClient && len(env.ClientCmd) > 0, acked: map[string]string{}, paused: map[int]bool{}}, nil
}

func (f *fencedRun) ack(path string) func(string) {
	return func(elem string) {
		f.mu.Lock()
		f.acked[elem] = path
		f.mu.Unlock()
	}
}

func (f *fencedRun) run(ctx context.Context) error {
	var wg sync.WaitGroup
	for k := 0; k < 3; k++ {
		links, err := f.c.NewClientLinks(fmt.Sprintf("set-%d", k), k)
		if err != nil {
			return err
		}
		f.links = append(f.links, links)
		path := f.paths[k%len(f.paths)]
		fc := &FencedClient{Name: fmt.Sprintf("in%d", k), Endpoints: links.Endpoints(), Oracle: f.oracle.URL(), Path: path,
			TTL: 2 * time.Second, Hold: 20 * time.Millisecond, OnAck: f.ack(path),
			OnReject: func(s string) { f.mu.Lock(); f.rejects = append(f.rejects, s); f.mu.Unlock() }}
		wg.Add(1)
		go func() { defer wg.Done(); fc.Run(ctx) }()
	}
	if f.procs {
		for k := 0; k < 2; k++ {
			if err := f.startProc(ctx, k, &wg); err != nil {
				return err
			}
		}
	}
	wg.Wait()
	return nil
}

// startProc runs `warden-chaos client` and reads its ACK lines.
func (f *fencedRun) startProc(ctx context.Context, k int, wg *sync.WaitGroup) error {
	path := f.paths[k%len(f.paths)]
	args := append(append([]string(nil), f.env.ClientCmd[1:]...), "client",
		"--endpoints", strings.Join(f.c.ClientAddrs(), ","), "--oracle", f.oracle.URL(),
		"--path", path, "--name", fmt.Sprintf("proc%d", k), "--ttl", "2s", "--hold", "300ms")
	cmd := exec.Command(f.env.ClientCmd[0], args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	f.mu.Lock()
	f.cmds = append(f.cmds, cmd)
	f.mu.Unlock()
	wg.Add(2)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if elem, ok := strings.CutPrefix(sc.Text(), "ACK "); ok {
				f.ack(path)(elem)
			}
		}
	}()
	go func() {
		defer wg.Done()
		<-ctx.Done()
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()
	return nil
}

// pauseOne stops one client process (SIGSTOP); without processes it cuts
// an in-process client's links instead (its session runs out meanwhile).
func (f *fencedRun) pauseOne(rng *rand.Rand) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.cmds) > 0 {
		i := rng.Intn(len(f.cmds))
		f.cmds[i].Process.Signal(syscall.SIGSTOP)
		f.paused[i] = true
		f.c.Log.Add("SIGSTOP lock-set client process %d (pid %d)", i, f.cmds[i].Process.Pid)
		return
	}
	if len(f.links) > 0 {
		i := rng.Intn(len(f.links))
		f.links[i].SetAll(Drop)
		f.c.Log.Add("cut lock-set client %d from the cluster", i)
	}
}

func (f *fencedRun) resumeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.paused {
		f.cmds[i].Process.Signal(syscall.SIGCONT)
		f.c.Log.Add("SIGCONT lock-set client process %d", i)
	}
	f.paused = map[int]bool{}
	for _, l := range f.links {
		l.SetAll(Pass)
	}
}

func (f *fencedRun) close() {
	f.oracle.Close()
	for _, l := range f.links {
		l.Close()
	}
}

// check: every acknowledged add is in the final list, exactly once.
func (f *fencedRun) check(r *Result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	lost, dup, total := 0, 0, 0
	var example string
	for _, p := range f.paths {
		seen := map[string]int{}
		list := f.oracle.List(p)
		total += len(list)
		for _, e := range list {
			seen[e]++
			if seen[e] == 2 {
				dup++
			}
		}
		for e, path := range f.acked {
			if path == p && seen[e] == 0 {
				lost++
				example = e
			}
		}
	}
	if lost > 0 {
		r.violate("fenced set: %d acknowledged adds lost (e.g. %s)", lost, example)
	}
	if dup > 0 {
		r.violate("fenced set: %d elements duplicated", dup)
	}
	for _, s := range f.rejects {
		r.violate("fenced set: %s", s)
	}
	r.note("fenced set: %d acknowledged adds, %d elements in the lists, %d client processes, %d stale accesses refused by the fence",
		len(f.acked), total, len(f.cmds), f.oracle.Refused())
}

func (f *fencedRun) summary() map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	lists := map[string][]string{}
	for _, p := range f.paths {
		lists[p] = f.oracle.List(p)
	}
	return map[string]any{"acked": f.acked, "lists": lists, "rejects": f.rejects}
}
