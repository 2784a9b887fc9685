package loadtest

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
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
	Dir     string  `json:"dir"`
	Writers int     `json:"writers"`
	Paced   float64 `json:"paced_per_writer,omitempty"` // fdatasyncs/s per writer; 0: flat out
	Syncs   Stats   `json:"syncs"`                      // the syncs' latencies (Rate: all writers together)
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

// DiskProbe configures a probe (ProbeDisk uses the defaults of the
// benchmark reports: 3 writers flat out).
type DiskProbe struct {
	Dir      string
	Writers  int           // concurrent writers, each on its own file (default 3)
	Rate     float64       // fdatasyncs per second per writer, paced; 0: flat out
	Duration time.Duration // how long to write
}

// Stall is one probed fdatasync over SlowSync: when it started (from the
// probe's start) and how long it took.
type Stall struct {
	At, Took time.Duration
}

// Run runs the probe and returns its figures and every stall, in order.
// Its files are removed after.
func (p DiskProbe) Run() (DiskFacts, []Stall, error) {
	if p.Writers <= 0 {
		p.Writers = probeWriters
	}
	facts := DiskFacts{Dir: p.Dir, Writers: p.Writers, Paced: p.Rate}
	tmp, err := os.MkdirTemp(p.Dir, "warden-disk-probe-")
	if err != nil {
		return facts, nil, err
	}
	defer os.RemoveAll(tmp)
	hists := make([]*Hist, p.Writers)
	stalls := make([][]Stall, p.Writers)
	errs := make([]error, p.Writers)
	start := time.Now()
	deadline := start.Add(p.Duration)
	var wg sync.WaitGroup
	for w := range p.Writers {
		hists[w] = NewHist()
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = probeWriter(filepath.Join(tmp, fmt.Sprintf("w%d", w)), p.Rate, deadline, func(at time.Time, took time.Duration) {
				hists[w].Record(took)
				if took > SlowSync {
					stalls[w] = append(stalls[w], Stall{at.Sub(start), took})
				}
			})
		}()
	}
	wg.Wait()
	all, h := []Stall(nil), NewHist()
	for w := range p.Writers {
		if errs[w] != nil {
			return facts, nil, errs[w]
		}
		h.Merge(hists[w])
		all = append(all, stalls[w]...)
	}
	if h.Count() == 0 {
		return facts, nil, fmt.Errorf("disk probe in %s: no fdatasync completed in %v", p.Dir, p.Duration)
	}
	slices.SortFunc(all, func(a, b Stall) int { return cmp.Compare(a.At, b.At) })
	facts.Syncs = h.Stats(time.Since(start))
	facts.SlowShare = float64(len(all)) / float64(h.Count())
	return facts, all, nil
}

// probeWriter appends to a preallocated file (syncLog: the probe's syncs
// carry no metadata, like the log store's preallocated segments), a block
// and an fdatasync at a time, at rate per second (0: back to back) until
// deadline, reporting each sync to took.
func probeWriter(path string, rate float64, deadline time.Time, took func(time.Time, time.Duration)) error {
	wal, err := openSyncLog(path)
	if err != nil {
		return err
	}
	defer wal.close()
	var every time.Duration
	if rate > 0 {
		every = time.Duration(float64(time.Second) / rate)
	}
	next := time.Now()
	for i := 0; ; i++ {
		if every > 0 {
			time.Sleep(time.Until(next))
			next = next.Add(every)
		}
		start := time.Now()
		if !start.Before(deadline) {
			return nil
		}
		if err := wal.append([]byte{byte(i)}); err != nil {
			return err
		}
		took(start, time.Since(start))
	}
}

// String is the probe as one phrase for a report's machine line.
func (f DiskFacts) String() string {
	if f.Syncs.Count == 0 {
		return "disk not probed"
	}
	pace := "flat out"
	if f.Paced > 0 {
		pace = fmt.Sprintf("%.0f/s each", f.Paced)
	}
	return fmt.Sprintf("disk (%s): 4 KiB write + fdatasync from %d writers at once (%s), p50 %.2f ms, p99 %.2f ms, p99.9 %.1f ms, max %.1f ms, %.2f %% over %v (%d syncs)",
		f.Dir, f.Writers, pace, f.Syncs.P50Ms, f.Syncs.P99Ms, f.Syncs.P999Ms, f.Syncs.MaxMs, 100*f.SlowShare, SlowSync, f.Syncs.Count)
}

// ProbeDisk probes the disk under dir for about d with the default probe
// (see DiskFacts) and keeps the result in m; a probe that fails is noted in
// the report instead.
func (m *Machine) ProbeDisk(dir string, d time.Duration) {
	f, _, err := DiskProbe{Dir: dir, Duration: d}.Run()
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
