package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
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
		limit := cgroupCPULimit("/proc/self/cgroup", "/sys/fs/cgroup")
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

// cgroupCPULimit is the tightest CPU bandwidth limit, in cores, on the
// cgroup of this process (listed in cgroupFile, /proc/self/cgroup) and
// its ancestors under root (/sys/fs/cgroup); 0 when there is none or it
// cannot be read. It reads cgroup v2's cpu.max and v1's cpu controller.
func cgroupCPULimit(cgroupFile, root string) float64 {
	b, err := os.ReadFile(cgroupFile)
	if err != nil {
		return 0
	}
	best := 0.0
	tighter := func(c float64) {
		if c > 0 && (best == 0 || c < best) {
			best = c
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		ctrls, path := parts[1], parts[2]
		switch {
		case parts[0] == "0" && ctrls == "":
			walkUp(filepath.Join(root, path), root, func(dir string) { tighter(cpuMaxV2(dir)) })
		case hasController(ctrls, "cpu"):
			for _, mount := range []string{filepath.Join(root, ctrls), filepath.Join(root, "cpu")} {
				if _, err := os.Stat(mount); err == nil {
					walkUp(filepath.Join(mount, path), mount, func(dir string) { tighter(cpuQuotaV1(dir)) })
					break
				}
			}
		}
	}
	return best
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// walkUp calls f on dir and each parent up to and including top.
func walkUp(dir, top string, f func(string)) {
	for {
		f(dir)
		if dir == top || !strings.HasPrefix(dir, top) {
			return
		}
		dir = filepath.Dir(dir)
	}
}

// cpuMaxV2 reads "quota period" (or "max period") from cpu.max.
func cpuMaxV2(dir string) float64 {
	b, err := os.ReadFile(filepath.Join(dir, "cpu.max"))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 || f[0] == "max" {
		return 0
	}
	return ratio(f[0], f[1])
}

// cpuQuotaV1 reads cpu.cfs_quota_us (-1: none) over cpu.cfs_period_us.
func cpuQuotaV1(dir string) float64 {
	q, err1 := os.ReadFile(filepath.Join(dir, "cpu.cfs_quota_us"))
	p, err2 := os.ReadFile(filepath.Join(dir, "cpu.cfs_period_us"))
	if err1 != nil || err2 != nil {
		return 0
	}
	return ratio(strings.TrimSpace(string(q)), strings.TrimSpace(string(p)))
}

func ratio(quota, period string) float64 {
	q, err1 := strconv.ParseInt(quota, 10, 64)
	p, err2 := strconv.ParseInt(period, 10, 64)
	if err1 != nil || err2 != nil || q <= 0 || p <= 0 {
		return 0
	}
	return float64(q) / float64(p)
}
