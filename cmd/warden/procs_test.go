package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParseProcs(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		n        int
		auto     bool
		bad      bool
	}{
		{name: "default is auto", in: "", auto: true},
		{name: "auto", in: "Auto", auto: true},
		{name: "runtime's own", in: "runtime"},
		{name: "a count", in: "3", n: 3},
		{name: "zero", in: "0", bad: true},
		{name: "garbage", in: "many", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, auto, err := parseProcs(tc.in)
			if (err != nil) != tc.bad || n != tc.n || auto != tc.auto {
				t.Fatalf("parseProcs(%q) = %d, %v, %v; want %d, %v, error %v", tc.in, n, auto, err, tc.n, tc.auto, tc.bad)
			}
		})
	}
}

func TestCgroupCPULimit(t *testing.T) {
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
			if got := cgroupCPULimit(cg, root); got != tc.want {
				t.Fatalf("cgroupCPULimit = %v, want %v", got, tc.want)
			}
		})
	}
}
