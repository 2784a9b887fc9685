// Command syncbench measures what one durable WAL write costs on a disk:
// write then fdatasync at the end of a growing file, the same into space
// that was zero-filled and synced beforehand, and pwritev2(RWF_DSYNC)
// (one syscall) for both, plus fallocate'd (unwritten) space. Modes are
// alternated in short rounds so that load changes hit every mode alike.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"golang.org/x/sys/unix"
)

type mode struct {
	name     string
	prealloc string // "", "zero", "fallocate"
	dsync    bool
	f        *os.File
	off      int64
	lat      []time.Duration
}

func main() {
	dir := flag.String("dir", ".", "directory on the disk to measure")
	n := flag.Int("n", 3000, "samples per mode")
	round := flag.Int("round", 100, "samples per mode before switching to the next")
	size := flag.Int("size", 2048, "bytes per write")
	flag.Parse()
	modes := []*mode{
		{name: "append+fdatasync"},
		{name: "overwrite-zeroed+fdatasync", prealloc: "zero"},
		{name: "append+RWF_DSYNC", dsync: true},
		{name: "overwrite-zeroed+RWF_DSYNC", prealloc: "zero", dsync: true},
		{name: "fallocate+fdatasync", prealloc: "fallocate"},
	}
	span := int64(*n) * int64(*size)
	for i, m := range modes {
		p := filepath.Join(*dir, fmt.Sprintf("syncbench-%d", i))
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		check(err)
		defer os.Remove(p)
		defer f.Close()
		switch m.prealloc {
		case "zero":
			zero := make([]byte, 1<<20)
			for off := int64(0); off < span; off += int64(len(zero)) {
				_, err = f.WriteAt(zero, off)
				check(err)
			}
		case "fallocate":
			check(unix.Fallocate(int(f.Fd()), 0, 0, span))
		}
		check(unix.Fdatasync(int(f.Fd())))
		m.f = f
	}
	buf := make([]byte, *size)
	for i := range buf {
		buf[i] = byte(i)
	}
	for done := 0; done < *n; done += *round {
		for _, m := range modes {
			for j := 0; j < *round && done+j < *n; j++ {
				t0 := time.Now()
				if m.dsync {
					_, err := unix.Pwritev2(int(m.f.Fd()), [][]byte{buf}, m.off, unix.RWF_DSYNC)
					check(err)
				} else {
					_, err := m.f.WriteAt(buf, m.off)
					check(err)
					check(unix.Fdatasync(int(m.f.Fd())))
				}
				m.lat = append(m.lat, time.Since(t0))
				m.off += int64(len(buf))
			}
		}
	}
	fmt.Printf("| mode | samples | p50 µs | p90 µs | p99 µs | p99.9 µs | mean µs |\n|---|---|---|---|---|---|---|\n")
	for _, m := range modes {
		sort.Slice(m.lat, func(i, j int) bool { return m.lat[i] < m.lat[j] })
		var sum time.Duration
		for _, d := range m.lat {
			sum += d
		}
		q := func(p float64) float64 { return float64(m.lat[int(p*float64(len(m.lat)-1))].Microseconds()) }
		fmt.Printf("| %s | %d | %.0f | %.0f | %.0f | %.0f | %.0f |\n", m.name, len(m.lat),
			q(0.5), q(0.9), q(0.99), q(0.999), float64(sum.Microseconds())/float64(len(m.lat)))
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "syncbench:", err)
		os.Exit(1)
	}
}
