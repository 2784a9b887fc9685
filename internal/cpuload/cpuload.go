// Package cpuload measures how much of the CPU it may use this process
// uses: the cores its threads ran on over the last few seconds, against
// the cores its cgroup's quota allows (or the machine's, without a quota).
// The shard policy compares nodes by it (control/policy.go), and every
// node reports it in its status.
package cpuload

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Reading is the process's CPU use over the meter's window.
type Reading struct {
	Used     float64 `json:"used"`     // cores, averaged over the window
	Capacity float64 `json:"capacity"` // cores it may use: its cgroup's quota, else the machine's
}

// Share is Used as a share of Capacity (0 when the capacity is unknown).
func (r Reading) Share() float64 {
	if r.Capacity <= 0 {
		return 0
	}
	return r.Used / r.Capacity
}

// Window is the span a Reading averages over.
const Window = 5 * time.Second

// sampleEvery is how often the meter reads the process's CPU time.
const sampleEvery = time.Second

type sample struct {
	at  time.Time
	cpu time.Duration
}

// Meter samples the process's CPU time every second and keeps the last
// Window of samples. The zero value is unusable: use Start.
type Meter struct {
	mu      sync.Mutex
	samples []sample // oldest first, at most Window/sampleEvery+1
	cap     float64
	stop    chan struct{}
	done    chan struct{}
}

// Start begins sampling; Stop ends it.
func Start() *Meter {
	m := &Meter{stop: make(chan struct{}), done: make(chan struct{})}
	m.take()
	go m.run()
	return m
}

func (m *Meter) run() {
	defer close(m.done)
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.take()
		}
	}
}

// take records one sample and re-reads the capacity: a process may be
// moved into a cgroup, or its quota changed, while it runs.
func (m *Meter) take() {
	s := sample{at: time.Now(), cpu: processCPU()}
	c := Capacity()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.samples = append(m.samples, s)
	if keep := int(Window/sampleEvery) + 1; len(m.samples) > keep {
		m.samples = append(m.samples[:0], m.samples[len(m.samples)-keep:]...)
	}
	m.cap = c
}

// Read returns the use over the samples held (zero Used until two exist).
func (m *Meter) Read() Reading {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := Reading{Capacity: m.cap}
	if n := len(m.samples); n >= 2 {
		first, last := m.samples[0], m.samples[n-1]
		if wall := last.at.Sub(first.at); wall > 0 {
			r.Used = float64(last.cpu-first.cpu) / float64(wall)
		}
	}
	return r
}

// Stop ends the sampling.
func (m *Meter) Stop() {
	close(m.stop)
	<-m.done
}

// processCPU is the user and system time of every thread of the process.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Capacity is the cores the process may use: its cgroup's CPU limit when
// it has one under the machine's count, else the machine's count.
func Capacity() float64 {
	cores := float64(runtime.NumCPU())
	if q := CgroupLimit(); q > 0 && q < cores {
		return q
	}
	return cores
}

// CgroupLimit is the tightest CPU bandwidth limit, in cores, on this
// process's cgroup and its ancestors; 0 when there is none or it cannot be
// read.
func CgroupLimit() float64 { return cgroupLimit("/proc/self/cgroup", "/sys/fs/cgroup") }

// cgroupLimit is the tightest CPU bandwidth limit, in cores, on the
// cgroup of this process (listed in cgroupFile, /proc/self/cgroup) and
// its ancestors under root (/sys/fs/cgroup); 0 when there is none or it
// cannot be read. It reads cgroup v2's cpu.max and v1's cpu controller.
func cgroupLimit(cgroupFile, root string) float64 {
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
