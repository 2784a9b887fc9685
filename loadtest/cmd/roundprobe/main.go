// Command roundprobe measures the floor under one replicated, durable write
// on this machine (loadtest.ProbeRounds): a client and three replicas, each
// a process of its own on 127.0.0.1, one request at a time; the leader
// answers after its own fdatasync and one follower's. It runs twice: without
// syncs (the hops between processes alone) and with them. What a lock
// service's one-client acquire and contended hand-off take above these
// rounds is the service's own.
//
//	go run ./loadtest/cmd/roundprobe --duration 5s [--json out.json]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/wardenlock/warden/loadtest"
)

func main() {
	loadtest.RoundReplicaMain()
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
	var results []loadtest.RoundFacts
	for _, mode := range strings.Split(*modes, ",") {
		if mode != "hops" && mode != "sync" {
			fmt.Fprintf(os.Stderr, "roundprobe: unknown mode %q (want hops or sync)\n", mode)
			os.Exit(2)
		}
		r, err := loadtest.ProbeRounds(ctx, *dir, mode == "sync", *warmup, *duration)
		if err != nil {
			fmt.Fprintf(os.Stderr, "roundprobe: %s: %v\n", mode, err)
			os.Exit(1)
		}
		fmt.Printf("%-5s %s\n", mode, r)
		results = append(results, r)
	}
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(struct {
			Machine loadtest.Machine      `json:"machine"`
			Results []loadtest.RoundFacts `json:"results"`
		}{loadtest.ThisMachine(), results}, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "roundprobe:", err)
			os.Exit(1)
		}
	}
}
