package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// The Go runtime lets the heap grow to twice its live size between
// collections (GOGC=100), so a node's RSS is 2–3× the memory it needs. A
// soft memory limit makes the collector run sooner as the heap nears it,
// instead of letting garbage double the footprint. It is soft: a node whose
// live heap exceeds it keeps working (and collects often).

// memoryLimitShare is the part of the machine's memory (or of the
// container's limit) that --memory-limit=auto gives one node.
const memoryLimitShare = 0.5

// memoryLimit turns --memory-limit into bytes for debug.SetMemoryLimit:
// "auto" (half the machine's or container's memory; an explicit
// GOMEMLIMIT wins), "off", or a size such as 512MiB, 2GiB or 800000000.
// ok is false when the runtime's own setting is to be left alone.
func memoryLimit(v string) (limit int64, ok bool, err error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "auto":
		if os.Getenv("GOMEMLIMIT") != "" {
			return 0, false, nil
		}
		total := machineMemory()
		if total <= 0 {
			return 0, false, nil
		}
		return int64(float64(total) * memoryLimitShare), true, nil
	case "off", "0":
		return math.MaxInt64, true, nil
	}
	n, err := parseSize(v)
	if err != nil || n < 64<<20 {
		return 0, false, fmt.Errorf("--memory-limit %q: want auto, off, or a size of at least 64MiB such as 512MiB or 2GiB", v)
	}
	return n, true, nil
}

// applyMemoryLimit sets the runtime's soft memory limit from --memory-limit,
// and the heap floor under it.
func applyMemoryLimit(v string) (int64, error) {
	limit, ok, err := memoryLimit(v)
	switch {
	case err != nil:
		return debug.SetMemoryLimit(-1), err
	case ok:
		debug.SetMemoryLimit(limit)
	default:
		limit = debug.SetMemoryLimit(-1) // GOMEMLIMIT's, or none
	}
	heapFloor = make([]byte, floorBytes(limit))
	return limit, nil
}

// The collector runs each time the heap doubles its live size, so a node
// whose live heap is small collects very often however much memory the
// machine has: one shard under load holds ≈ 11 MB and collects ≈ 60
// times a second across its nodes, ≈ 6 ms of CPU each. heapFloor is
// counted as live but never written, so it takes no resident memory (its
// pages are never touched) and holds no pointers to scan: it only raises
// the heap size the collector waits for, by twice its size, within the
// soft limit.
var heapFloor []byte

// floorBytes is the heap floor under a soft limit: 64 MiB, or an eighth of
// a smaller limit.
func floorBytes(limit int64) int64 { return min(64<<20, max(limit, 0)/8) }

// parseSize reads a byte count with an optional binary suffix (K, M, G,
// KiB, MiB, GiB; KB, MB and GB mean the same).
func parseSize(v string) (int64, error) {
	s := strings.ToUpper(strings.TrimSpace(v))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GIB", 1 << 30}, {"MIB", 1 << 20}, {"KIB", 1 << 10}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q: want a number of bytes with an optional K, M or G suffix", v)
	}
	return n * mult, nil
}

// machineMemory is the memory this process may use: the cgroup's limit
// when one is set, else the machine's total (0 when unknown).
func machineMemory() int64 {
	total := memTotal()
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err == nil && n > 0 && (total == 0 || n < total) {
			return n
		}
	}
	return total
}

func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}
