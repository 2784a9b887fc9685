package cpuload

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// The limit is the tightest on the process's cgroup and its ancestors,
// under either hierarchy; none (or no cgroup file) gives 0.
func TestCgroupLimit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cgroup string
		files  map[string]string // under the fake /sys/fs/cgroup
		want   float64
	}{
		{name: "v2 quota", cgroup: "0::/bench/node1\n",
			files: map[string]string{"bench/node1/cpu.max": "25000 100000\n", "cpu.max": "max 100000\n"}, want: 0.25},
		{name: "v2 no limit", cgroup: "0::/bench/node1\n",
			files: map[string]string{"bench/node1/cpu.max": "max 100000\n"}, want: 0},
		{name: "v2 parent is tighter", cgroup: "0::/a/b\n",
			files: map[string]string{"a/b/cpu.max": "300000 100000\n", "a/cpu.max": "50000 100000\n"}, want: 0.5},
		{name: "v1 cpu controller", cgroup: "2:cpuacct:/\n1:cpu:/warden-bench-1-node1\n0::/\n",
			files: map[string]string{
				"cpu/warden-bench-1-node1/cpu.cfs_quota_us":  "2500\n",
				"cpu/warden-bench-1-node1/cpu.cfs_period_us": "10000\n",
				"cpu/cpu.cfs_quota_us":                       "-1\n",
				"cpu/cpu.cfs_period_us":                      "100000\n",
			}, want: 0.25},
		{name: "v1 joint cpu,cpuacct mount", cgroup: "3:cpu,cpuacct:/n\n",
			files: map[string]string{"cpu,cpuacct/n/cpu.cfs_quota_us": "150000\n",
				"cpu,cpuacct/n/cpu.cfs_period_us": "100000\n"}, want: 1.5},
		{name: "v1 unlimited", cgroup: "1:cpu:/\n",
			files: map[string]string{"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, want: 0},
		{name: "no cgroup files", cgroup: "0::/x\n", want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			root := filepath.Join(dir, "sys")
			if err := os.MkdirAll(root, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, body := range tc.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cg := filepath.Join(dir, "cgroup")
			if err := os.WriteFile(cg, []byte(tc.cgroup), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := cgroupLimit(cg, root); got != tc.want {
				t.Fatalf("cgroupLimit = %v, want %v", got, tc.want)
			}
		})
	}
}

// A reading averages the CPU time between the oldest and newest samples.
func TestReadAveragesTheWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	m := &Meter{cap: 0.5, samples: []sample{{at: t0, cpu: time.Second}}}
	if r := m.Read(); r.Used != 0 || r.Capacity != 0.5 {
		t.Fatalf("one sample: %+v, want no use yet", r)
	}
	m.samples = append(m.samples, sample{at: t0.Add(2 * time.Second), cpu: 1500 * time.Millisecond},
		sample{at: t0.Add(4 * time.Second), cpu: 2 * time.Second})
	r := m.Read()
	if r.Used != 0.25 || r.Share() != 0.5 {
		t.Fatalf("%+v share %g, want 0.25 cores, half the capacity", r, r.Share())
	}
	if (Reading{Used: 1}).Share() != 0 {
		t.Fatal("a reading without a capacity has a share")
	}
}

// The live meter reads this process: its capacity is positive and at most
// the machine's.
func TestMeterReadsThisProcess(t *testing.T) {
	m := Start()
	defer m.Stop()
	r := m.Read()
	if r.Capacity <= 0 || r.Capacity > float64(runtime.NumCPU()) {
		t.Fatalf("capacity %g", r.Capacity)
	}
	if processCPU() <= 0 {
		t.Fatal("no CPU time read for this process")
	}
}
