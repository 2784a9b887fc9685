package raftwal

import (
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	pb "github.com/lni/dragonboat/v4/raftpb"
)

// BenchmarkSaveRaftStateDisk: two callers (dragonboat's two step workers),
// each saving one 300-byte entry of its own shard per call, synced, on the
// disk under WAL_BENCH_DIR (default: the test's temp dir). It reports
// the call's p50 and p99 and fdatasyncs per call: the figures of the sync
// path, not of the CPU.
func BenchmarkSaveRaftStateDisk(b *testing.B) {
	dir := benchDir(b)
	w, err := Open(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	const workers = 2
	cmd := make([]byte, 300)
	lat := make([][]time.Duration, workers)
	per := b.N/workers + 1
	b.ResetTimer()
	var wg sync.WaitGroup
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ups := []pb.Update{{ShardID: uint64(g + 1), ReplicaID: 1}}
			for i := 0; i < per; i++ {
				idx := uint64(i + 1)
				ups[0].State = pb.State{Term: 1, Commit: idx - 1}
				ups[0].EntriesToSave = []pb.Entry{{Index: idx, Term: 1, Cmd: cmd}}
				t0 := time.Now()
				if err := w.SaveRaftState(ups, 1); err != nil {
					b.Error(err)
					return
				}
				lat[g] = append(lat[g], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	q := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))]) / 1e3 }
	b.ReportMetric(q(0.5), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
	b.ReportMetric(float64(w.Syncs.Load())/float64(len(all)), "syncs/call")
}

// benchDir is a directory for a benchmark's log on the disk under
// WAL_BENCH_DIR (default: the benchmark's temp dir), removed at its end.
func benchDir(b *testing.B) string {
	d := os.Getenv("WAL_BENCH_DIR")
	if d == "" {
		return b.TempDir()
	}
	dir, err := os.MkdirTemp(d, "walbench")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
