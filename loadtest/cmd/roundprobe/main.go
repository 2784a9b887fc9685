// Command roundprobe measures the floor under one replicated, durable write
// on this machine (loadtest.RoundProbe): a client and three replicas, each a
// process of its own on 127.0.0.1, one request at a time; the leader answers
// after its own fdatasync and one follower's. It runs twice: without syncs
// (the hops between processes alone) and with them. What Warden's one-client
// acquire and contended hand-off take above these rounds is Warden's own.
//
//	go run ./loadtest/cmd/roundprobe --duration 5s [--json out.json]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/wardenlock/warden/loadtest"
)

// replicaEnv, set, makes this binary one replica of the probe.
const replicaEnv = "ROUNDPROBE_REPLICA"

// Result is one mode's figures.
type Result struct {
	Mode   string         `json:"mode"` // "hops" (no syncs) or "sync"
	Rounds loadtest.Stats `json:"rounds"`
	// Ceiling is the hand-offs per second one lock could see if a hand-off
	// cost exactly one of these rounds (1 / mean round).
	Ceiling float64 `json:"ceiling_per_s"`
}

func main() {
	if os.Getenv(replicaEnv) != "" {
		if err := replica(); err != nil {
			fmt.Fprintln(os.Stderr, "roundprobe replica:", err)
			os.Exit(1)
		}
		return
	}
	var (
		dir      = flag.String("dir", os.TempDir(), "directory on the disk the replicas' logs go to")
		duration = flag.Duration("duration", 5*time.Second, "measured time per mode")
		warmup   = flag.Duration("warmup", time.Second, "unmeasured rounds before each mode")
		modes    = flag.String("modes", "hops,sync", "comma-separated: hops (no fdatasync), sync")
		jsonOut  = flag.String("json", "", "also write the results as JSON to this file")
	)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var results []Result
	for _, mode := range strings.Split(*modes, ",") {
		if mode != "hops" && mode != "sync" {
			fmt.Fprintf(os.Stderr, "roundprobe: unknown mode %q (want hops or sync)\n", mode)
			os.Exit(2)
		}
		r, err := probe(ctx, mode, *dir, *warmup, *duration)
		if err != nil {
			fmt.Fprintf(os.Stderr, "roundprobe: %s: %v\n", mode, err)
			os.Exit(1)
		}
		s := r.Rounds
		fmt.Printf("%-5s rounds: p50 %.3f ms, p90 %.3f, p99 %.2f, p99.9 %.2f, max %.2f, mean %.3f (%d rounds); one lock's hand-off ceiling %.0f/s\n",
			mode, s.P50Ms, s.P90Ms, s.P99Ms, s.P999Ms, s.MaxMs, s.MeanMs, s.Count, r.Ceiling)
		results = append(results, r)
	}
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(struct {
			Machine loadtest.Machine `json:"machine"`
			Results []Result         `json:"results"`
		}{loadtest.ThisMachine(), results}, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "roundprobe:", err)
			os.Exit(1)
		}
	}
}

// probe starts two followers and a leader as processes, runs the client
// against the leader and stops them.
func probe(ctx context.Context, mode, dir string, warmup, duration time.Duration) (Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	var cmds []*exec.Cmd
	defer func() {
		cancel() // kills the replicas
		for _, c := range cmds {
			_ = c.Wait()
		}
	}()
	start := func(followers []string) (string, error) {
		c := exec.CommandContext(ctx, os.Args[0], "--dir", dir, "--sync="+fmt.Sprint(mode == "sync"),
			"--followers", strings.Join(followers, ","))
		c.Env = append(os.Environ(), replicaEnv+"=1")
		c.Stderr = os.Stderr
		// The replica lives while its standard input is open: if this
		// process dies without killing it, it stops by itself.
		if _, err := c.StdinPipe(); err != nil {
			return "", err
		}
		out, err := c.StdoutPipe()
		if err != nil {
			return "", err
		}
		if err := c.Start(); err != nil {
			return "", err
		}
		cmds = append(cmds, c)
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			return "", fmt.Errorf("replica did not say where it listens: %w", err)
		}
		return strings.TrimSpace(line), nil
	}
	var followers []string
	for range 2 {
		addr, err := start(nil)
		if err != nil {
			return Result{}, err
		}
		followers = append(followers, addr)
	}
	leader, err := start(followers)
	if err != nil {
		return Result{}, err
	}
	s, err := loadtest.RoundProbe{Leader: leader, Warmup: warmup, Duration: duration}.Run(ctx)
	if err != nil {
		return Result{}, err
	}
	r := Result{Mode: mode, Rounds: s}
	if s.MeanMs > 0 {
		r.Ceiling = 1000 / s.MeanMs
	}
	return r, nil
}

// replica is one replica process: it prints the address it listens on and
// serves until its standard input closes (the parent is gone) or it is
// killed.
func replica() error {
	fs := flag.NewFlagSet("replica", flag.ContinueOnError)
	dir := fs.String("dir", os.TempDir(), "")
	sync := fs.Bool("sync", true, "")
	followers := fs.String("followers", "", "")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	cfg := loadtest.ReplicaConfig{Dir: *dir, Sync: *sync}
	if *followers != "" {
		cfg.Followers = strings.Split(*followers, ",")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr())
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	return loadtest.ServeRoundReplica(ctx, ln, cfg)
}
