package loadtest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// DiskFacts is a short probe of the disk the servers keep their Raft logs
// on: 4 KiB overwrites, each followed by an fdatasync, from three writers at
// once, because in these benchmarks three replicas share one disk. A lock
// operation waits for its leader's fdatasync and a follower's, so the probe's
// tail bounds the tail a benchmark can show: a virtual disk that stalls every
// writer for 20 ms now and then (a host's I/O rate limiter does) puts that
// stall into the p99 of every system measured on it, etcd's as much as
// Warden's. Figures from different days compare only with the disk's.
type DiskFacts struct {
	Dir    string  `json:"dir"`
	Syncs  int     `json:"syncs"`
	P50Us  float64 `json:"p50_us"`
	P99Us  float64 `json:"p99_us"`
	P999Us float64 `json:"p999_us"`
	MaxUs  float64 `json:"max_us"`
	// SlowShare is the share of fdatasyncs that took over SlowSync.
	SlowShare float64 `json:"slow_share"`
}

// SlowSync is the latency above which a probed fdatasync counts as a stall.
const SlowSync = 5 * time.Millisecond

const (
	probeWriters = 3
	probeBlock   = 4096
	probeBlocks  = 64 // each writer cycles over a 256 KiB file
)

// ProbeDisk runs the probe in dir for about d. Its files are removed after.
func ProbeDisk(dir string, d time.Duration) (DiskFacts, error) {
	facts := DiskFacts{Dir: dir}
	tmp, err := os.MkdirTemp(dir, "warden-disk-probe-")
	if err != nil {
		return facts, err
	}
	defer os.RemoveAll(tmp)
	lat := make([][]time.Duration, probeWriters)
	errs := make([]error, probeWriters)
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := range probeWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat[w], errs[w] = probeWriter(filepath.Join(tmp, fmt.Sprintf("w%d", w)), deadline)
		}()
	}
	wg.Wait()
	var all []time.Duration
	for w := range probeWriters {
		if errs[w] != nil {
			return facts, errs[w]
		}
		all = append(all, lat[w]...)
	}
	if len(all) == 0 {
		return facts, fmt.Errorf("disk probe in %s: no fdatasync completed in %v", dir, d)
	}
	slices.Sort(all)
	at := func(q float64) float64 { return float64(all[int(q*float64(len(all)-1))]) / 1e3 }
	fast, _ := slices.BinarySearch(all, SlowSync+1)
	facts.Syncs = len(all)
	facts.P50Us, facts.P99Us, facts.P999Us = at(0.5), at(0.99), at(0.999)
	facts.MaxUs = float64(all[len(all)-1]) / 1e3
	facts.SlowShare = float64(len(all)-fast) / float64(len(all))
	return facts, nil
}

// probeWriter preallocates its file (so the probe's syncs carry no
// metadata, like the log store's preallocated segments) and then overwrites
// it a block at a time, each write followed by an fdatasync, until deadline.
func probeWriter(path string, deadline time.Time) ([]time.Duration, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	block := make([]byte, probeBlock)
	for i := range probeBlocks {
		if _, err := f.WriteAt(block, int64(i*probeBlock)); err != nil {
			return nil, err
		}
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return nil, err
	}
	var lat []time.Duration
	for i := 0; time.Now().Before(deadline); i++ {
		block[0] = byte(i)
		start := time.Now()
		if _, err := f.WriteAt(block, int64(i%probeBlocks*probeBlock)); err != nil {
			return nil, err
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(start))
	}
	return lat, nil
}

// String is the probe as one phrase for a report's machine line.
func (f DiskFacts) String() string {
	if f.Syncs == 0 {
		return "disk not probed"
	}
	return fmt.Sprintf("disk (%s): 4 KiB write + fdatasync from %d writers at once, p50 %.0f µs, p99 %.2f ms, p99.9 %.1f ms, max %.1f ms, %.2f %% over %v (%d syncs)",
		f.Dir, probeWriters, f.P50Us, f.P99Us/1e3, f.P999Us/1e3, f.MaxUs/1e3, 100*f.SlowShare, SlowSync, f.Syncs)
}

// ProbeDisk probes the disk under dir for about d (see DiskFacts) and keeps
// the result in m; a probe that fails is noted in the report instead.
func (m *Machine) ProbeDisk(dir string, d time.Duration) {
	f, err := ProbeDisk(dir, d)
	if err != nil {
		m.DiskError = err.Error()
		return
	}
	m.Disk = &f
}

// DiskLine is the disk probe as a sentence for a report ("" if not run).
func (m Machine) DiskLine() string {
	switch {
	case m.Disk != nil:
		return "Disk probe before the run, " + m.Disk.String() + "."
	case m.DiskError != "":
		return "Disk probe failed: " + m.DiskError + "."
	}
	return ""
}
