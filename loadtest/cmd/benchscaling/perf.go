package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// perfCount is one perf event's count (or count per operation).
type perfCount struct {
	event string
	n     float64
}

// perfStat counts o.perfEvents over the node processes pids during the
// measured time (after the warm-up) with `perf stat`; the function it
// returns waits for the counts and says how many seconds they cover.
// Syscall tracepoints count what /proc/<pid>/io does not (fdatasync, futex,
// epoll), sched:sched_switch the threads' wake-ups.
func perfStat(ctx context.Context, o options, pids []int) func() ([]perfCount, float64, error) {
	if o.perfEvents == "" {
		return func() ([]perfCount, float64, error) { return nil, 0, nil }
	}
	type result struct {
		c   []perfCount
		err error
	}
	secs := max(1, int((o.duration-time.Second)/time.Second))
	done := make(chan result, 1)
	go func() {
		select {
		case <-time.After(o.warmup):
		case <-ctx.Done():
			done <- result{err: ctx.Err()}
			return
		}
		var ps []string
		for _, p := range pids {
			ps = append(ps, strconv.Itoa(p))
		}
		cmd := exec.CommandContext(ctx, "perf", "stat", "-x", ",", "-e", o.perfEvents,
			"-p", strings.Join(ps, ","), "--", "sleep", strconv.Itoa(secs))
		var out bytes.Buffer
		cmd.Stderr = &out // perf stat writes its counts to stderr
		if err := cmd.Run(); err != nil {
			done <- result{err: fmt.Errorf("%w: %s", err, strings.TrimSpace(out.String()))}
			return
		}
		done <- result{c: parsePerfStat(out.String())}
	}()
	return func() ([]perfCount, float64, error) {
		r := <-done
		return r.c, float64(secs), r.err
	}
}

// parsePerfStat reads `perf stat -x ,` lines: count,unit,event,...
func parsePerfStat(out string) []perfCount {
	var cs []perfCount
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, ",")
		if len(f) < 3 {
			continue
		}
		n, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue // "<not counted>", comments
		}
		cs = append(cs, perfCount{event: f[2], n: n})
	}
	return cs
}
