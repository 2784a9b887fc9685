package raftwal

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	pb "github.com/lni/dragonboat/v4/raftpb"

	"github.com/wardenlock/warden/internal/diskfs"
)

// BenchmarkRotationDisk: the steady state of one node's log on the disk
// under WAL_BENCH_DIR (default: the test's temp dir): calls of 100 entries
// of 150 bytes (a step worker's round at about the load benchload makes),
// synced, paced, on 8 MiB segments, with a snapshot and compaction every
// quarter segment of entries that keeps an eighth (dragonboat: every 100000
// entries, keeping 25000). Per call it reports the CPU of the whole
// process (the spare filler included), the bytes the process wrote
// (/proc/self/io), and the spares zero-filled and recycled per rotation.
func BenchmarkRotationDisk(b *testing.B) {
	dir := benchDir(b)
	const seg = 8 << 20
	w, err := Open(dir, Options{SegmentSize: seg})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	const perCall, size = 100, 150
	snapEvery := uint64(seg / 4 / (size + 10))
	cmd := make([]byte, size)
	es := make([]pb.Entry, perCall)
	idx := uint64(0)
	// Paced at about 6 MB/s: a segment lasts about as many times the
	// paced fill of a spare as on a node at benchload's rate (2 MB/s on
	// 64 MiB); unpaced, the log outruns the filler and grows segments.
	const perSecond = 6 << 20 / (perCall * size)
	next := time.Now()
	save := func() {
		next = next.Add(time.Second / perSecond)
		time.Sleep(time.Until(next))
		for i := range es {
			idx++
			es[i] = pb.Entry{Index: idx, Term: 1, Cmd: cmd}
		}
		if err := w.SaveRaftState([]pb.Update{{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 1, Commit: idx - perCall}, EntriesToSave: es}}, 1); err != nil {
			b.Fatal(err)
		}
		if idx%snapEvery < perCall && idx > snapEvery {
			ss := pb.Snapshot{ShardID: 1, Index: idx - perCall, Term: 1, Type: pb.RegularStateMachine}
			if err := w.SaveSnapshots([]pb.Update{{ShardID: 1, ReplicaID: 1, Snapshot: ss}}); err != nil {
				b.Fatal(err)
			}
			if err := w.RemoveEntriesTo(1, 1, idx-snapEvery/2); err != nil {
				b.Fatal(err)
			}
			if _, err := w.CompactEntriesTo(1, 1, idx-snapEvery/2); err != nil {
				b.Fatal(err)
			}
		}
	}
	// Warm up past the start-up ramp of small spares (1, 2, 4 MiB).
	for w.active().capacity < seg || w.active().num < 6 {
		save()
	}
	filled, recycled, first := w.SparesFilled.Load(), w.SparesRecycled.Load(), w.active().num
	wb0, wc0, cpu0 := writeBytes(b), procIO(b, "wchar: "), cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		save()
	}
	b.StopTimer()
	// Let a fill under way finish being counted in the CPU and bytes.
	time.Sleep(300 * time.Millisecond)
	n := float64(b.N)
	b.ReportMetric(float64(cpuTime()-cpu0)/n/1e3, "cpu-us/call")
	b.ReportMetric(float64(writeBytes(b)-wb0)/n, "wbytes/call")
	b.ReportMetric(float64(procIO(b, "wchar: ")-wc0)/n, "wchar/call")
	b.ReportMetric(float64(w.active().num-first), "rotations")
	b.ReportMetric(float64(w.SparesFilled.Load()-filled), "zerofills")
	b.ReportMetric(float64(w.SparesRecycled.Load()-recycled), "recycled")
}

func writeBytes(b *testing.B) int64 { return procIO(b, "write_bytes: ") }

func procIO(b *testing.B, key string) int64 {
	raw, err := os.ReadFile("/proc/self/io")
	if err != nil {
		b.Skip("no /proc/self/io")
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, key); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// cpuTime is the process's user and system CPU in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkFillSpareDisk: what one zero-filled 64 MiB spare costs the
// process (unpaced; the pacing spreads the same work over 2 s): the CPU
// of its writes and syncs, in ms per spare. A recycled spare costs none
// of it (one rename and one directory sync).
func BenchmarkFillSpareDisk(b *testing.B) {
	dir := benchDir(b)
	w := &WAL{dir: dir, fs: diskfs.Disk}
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		sp, err := w.fillSpare(DefaultSegmentSize, nil, false, nil)
		if err != nil {
			b.Fatal(err)
		}
		sp.f.Close()
		os.Remove(sp.path)
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e6, "cpu-ms/spare")
}
