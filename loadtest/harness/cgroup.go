package harness

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPULimit is a CPU-limited cgroup: the processes in it share a quota of
// Cores CPUs, enforced every Period (CFS bandwidth control). A benchmark
// puts each server process in its own CPULimit so that it has a machine's
// fixed CPU budget on a machine that has fewer cores than the cluster.
//
// It uses the cgroup v1 cpu controller when it is mounted (cpu.cfs_quota_us,
// cpu.cfs_period_us), otherwise cgroup v2 (cpu.max). Making one needs write
// access to the hierarchy (root, or a delegated subtree).
type CPULimit struct {
	Dir    string // the cgroup's directory
	Cores  float64
	Period time.Duration
	v2     bool
}

// CPUStat is what the kernel counted for a CPULimit: the enforcement
// periods in which its processes ran, those in which they used up the
// quota and were stopped until the next one, and for how long in all.
type CPUStat struct {
	Periods, Throttled int64
	ThrottledTime      time.Duration
}

// cgroupPrefix names every cgroup the harness makes, so that leftovers of a
// killed run can be found and removed.
const cgroupPrefix = "warden-bench-"

// NewCPULimit makes the cgroup <hierarchy>/warden-bench-<pid>-<name>
// (pid: this process) limited to cores CPUs per period (cores 0: no
// limit, for a group that only gets a weight). The error says why when no
// cpu controller is writable here.
func NewCPULimit(name string, cores float64, period time.Duration) (*CPULimit, error) {
	if cores < 0 || period <= 0 {
		return nil, fmt.Errorf("harness: CPU limit %.3g cores per %v: want cores ≥ 0 and a positive period", cores, period)
	}
	quota := int64(cores * float64(period/time.Microsecond))
	if cores > 0 && quota < 1000 {
		return nil, fmt.Errorf("harness: CPU limit %.3g cores per %v is a quota of %d µs; the kernel wants at least 1000 µs (a longer period or more cores)", cores, period, quota)
	}
	root, v2, err := cpuHierarchy()
	if err != nil {
		return nil, err
	}
	removeStale(root)
	l := &CPULimit{Dir: filepath.Join(root, fmt.Sprintf("%s%d-%s", cgroupPrefix, os.Getpid(), name)), Cores: cores, Period: period, v2: v2}
	if err := os.Mkdir(l.Dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("harness: make cgroup %s: %w (CPU limits need root or a delegated cgroup)", l.Dir, err)
	}
	periodUs := int64(period / time.Microsecond)
	if cores == 0 {
		return l, nil
	}
	if v2 {
		err = write(l.Dir, "cpu.max", fmt.Sprintf("%d %d", quota, periodUs))
	} else {
		// The period first: the kernel checks the quota against it.
		err = write(l.Dir, "cpu.cfs_period_us", strconv.FormatInt(periodUs, 10))
		if err == nil {
			err = write(l.Dir, "cpu.cfs_quota_us", strconv.FormatInt(quota, 10))
		}
	}
	if err != nil {
		_ = os.Remove(l.Dir)
		return nil, err
	}
	return l, nil
}

// Add moves process pid (all its threads) into the cgroup.
func (l *CPULimit) Add(pid int) error {
	return write(l.Dir, "cgroup.procs", strconv.Itoa(pid))
}

// Leave moves process pid back to the hierarchy's root cgroup (so that
// this one can be removed while the process runs on).
func (l *CPULimit) Leave(pid int) error {
	return write(filepath.Dir(l.Dir), "cgroup.procs", strconv.Itoa(pid))
}

// SetWeight gives the cgroup x times the CPU weight of an ordinary
// process (cpu.shares 1024·x on v1, cpu.weight 100·x on v2). When other
// work competes for the machine, a weight above theirs lets the group's
// processes use their quota before the others run: the quota stays a
// ceiling and becomes, as far as the machine has the CPU, a floor too.
func (l *CPULimit) SetWeight(x float64) error {
	if x <= 0 {
		return fmt.Errorf("harness: CPU weight %.3g: want a positive multiple", x)
	}
	if l.v2 {
		return write(l.Dir, "cpu.weight", strconv.Itoa(min(10000, max(1, int(100*x)))))
	}
	return write(l.Dir, "cpu.shares", strconv.Itoa(max(2, int(1024*x))))
}

// Stat reads the throttling counters.
func (l *CPULimit) Stat() (CPUStat, error) {
	f, err := os.Open(filepath.Join(l.Dir, "cpu.stat"))
	if err != nil {
		return CPUStat{}, err
	}
	defer f.Close()
	var s CPUStat
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch k {
		case "nr_periods":
			s.Periods = n
		case "nr_throttled":
			s.Throttled = n
		case "throttled_time": // v1, ns
			s.ThrottledTime = time.Duration(n)
		case "throttled_usec": // v2
			s.ThrottledTime = time.Duration(n) * time.Microsecond
		}
	}
	return s, sc.Err()
}

// Remove deletes the cgroup; its processes must have exited. It waits a
// little for the kernel to see them gone.
func (l *CPULimit) Remove() error {
	var err error
	for i := 0; i < 50; i++ {
		if err = os.Remove(l.Dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("harness: remove cgroup %s: %w", l.Dir, err)
}

func write(dir, file, value string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0o644); err != nil {
		return fmt.Errorf("harness: cgroup: write %q to %s: %w", value, filepath.Join(dir, file), err)
	}
	return nil
}

// cpuHierarchy finds where CPU-limited cgroups can be made: the cgroup v1
// hierarchy with the cpu controller, or the cgroup v2 hierarchy when it
// offers cpu (the controller is then enabled for its children).
func cpuHierarchy() (dir string, v2 bool, err error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", false, fmt.Errorf("harness: CPU limits need Linux cgroups: %w", err)
	}
	var unified []string
	for _, line := range strings.Split(string(b), "\n") {
		// id parent major:minor root mountpoint options ... - fstype source super-options
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		switch g[0] {
		case "cgroup":
			for _, o := range strings.Split(g[2], ",") {
				if o == "cpu" {
					if writable(f[4]) {
						return f[4], false, nil
					}
					return "", false, fmt.Errorf("harness: the cgroup v1 cpu hierarchy %s is not writable (CPU limits need root)", f[4])
				}
			}
		case "cgroup2":
			unified = append(unified, f[4])
		}
	}
	for _, m := range unified {
		ctl, err := os.ReadFile(filepath.Join(m, "cgroup.controllers"))
		if err != nil || !strings.Contains(" "+strings.TrimSpace(string(ctl))+" ", " cpu ") {
			continue
		}
		// Children get the cpu controller only if the parent enables it.
		_ = os.WriteFile(filepath.Join(m, "cgroup.subtree_control"), []byte("+cpu"), 0o644)
		if writable(m) {
			return m, true, nil
		}
		return "", false, fmt.Errorf("harness: the cgroup v2 hierarchy %s is not writable (CPU limits need root or a delegated cgroup)", m)
	}
	return "", false, errors.New("harness: no cgroup hierarchy with the cpu controller is mounted (CPU limits need cgroup v1 cpu or cgroup v2 with cpu enabled)")
}

func writable(dir string) bool {
	probe := filepath.Join(dir, fmt.Sprintf("%s%d-probe", cgroupPrefix, os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil {
		return false
	}
	_ = os.Remove(probe)
	return true
}

// removeStale removes the cgroups of benchmark processes that are gone (a
// killed run leaves them behind). The kernel refuses to remove one that
// still has processes in it.
func removeStale(root string) {
	ents, _ := os.ReadDir(root)
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), cgroupPrefix)
		pid, _, _ := strings.Cut(rest, "-")
		n, err := strconv.Atoi(pid)
		if !ok || !e.IsDir() || err != nil || n <= 0 || syscall.Kill(n, 0) != syscall.ESRCH {
			continue
		}
		_ = os.Remove(filepath.Join(root, e.Name()))
	}
}
