package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/wardenlock/warden/internal/cpuload"
)

// Go sets GOMAXPROCS to the cgroup's CPU limit rounded up, but never
// below 2. A node whose cgroup gives it at most one core then runs two Ps
// that take turns on its quota: every hand-off between the router, the
// proposer, dragonboat's workers and the transport can wake a second
// thread, and the second thread spins looking for work on a budget that
// has none to spare. With one P those hand-offs stay on one thread: on
// 0.25-core nodes context switches per operation halve, operations per
// Raft entry double and server CPU per operation falls by 6–9 %
// (docs/scaling.md). So --procs auto gives such a node
// one P, and leaves every other node to the runtime's default.

// procsPoll is how often --procs auto re-reads the CPU limit: a process
// can be put into its cgroup after it starts (the benchmark harness does)
// or have its limit changed while it runs.
const procsPoll = time.Second

// parseProcs reads --procs: "auto", "runtime" (Go's default), or a count.
func parseProcs(v string) (n int, auto bool, err error) {
	switch s := strings.ToLower(strings.TrimSpace(v)); s {
	case "", "auto":
		return 0, true, nil
	case "runtime":
		return 0, false, nil
	default:
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return 0, false, fmt.Errorf("--procs %q: want auto, runtime or a count of at least 1", v)
		}
		return n, false, nil
	}
}

// startProcs applies --procs and, for auto, keeps following the CPU limit
// until ctx ends. An explicit GOMAXPROCS in the environment wins.
func startProcs(ctx context.Context, v string, log *slog.Logger) error {
	n, auto, err := parseProcs(v)
	if err != nil {
		return err
	}
	switch {
	case os.Getenv("GOMAXPROCS") != "":
		return nil
	case n > 0:
		runtime.GOMAXPROCS(n)
		return nil
	case !auto:
		return nil
	}
	go followCPULimit(ctx, log)
	return nil
}

func followCPULimit(ctx context.Context, log *slog.Logger) {
	t := time.NewTicker(procsPoll)
	defer t.Stop()
	one := false
	for {
		limit := cpuload.CgroupLimit()
		if want := limit > 0 && limit <= 1; want != one {
			one = want
			if one {
				runtime.GOMAXPROCS(1)
			} else {
				runtime.SetDefaultGOMAXPROCS()
			}
			log.Info("GOMAXPROCS follows the CPU limit", "cores", limit, "procs", runtime.GOMAXPROCS(0))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
