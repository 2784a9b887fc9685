// Command diskprobe measures the disk a benchmark's servers log to: 4 KiB
// writes, each followed by an fdatasync, from several writers at once, flat
// out or paced, and lists the syncs that stalled. With --busy N it runs the
// same probe a second time beside N busy-looping processes, which shows
// whether the disk's latency depends on how busy the CPUs are (on a
// virtual machine whose I/O is emulated on the same host cores, it can).
//
//	go run ./loadtest/cmd/diskprobe --rate 830 --busy 2
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/wardenlock/warden/loadtest"
)

func main() {
	var p loadtest.DiskProbe
	var busy int
	var list bool
	flag.StringVar(&p.Dir, "dir", os.TempDir(), "directory on the disk to probe")
	flag.IntVar(&p.Writers, "writers", 3, "concurrent writers, each on its own file")
	flag.Float64Var(&p.Rate, "rate", 0, "fdatasyncs per second per writer (0: back to back)")
	flag.DurationVar(&p.Duration, "duration", 4*time.Second, "how long each probe writes")
	flag.IntVar(&busy, "busy", 0, "> 0: probe again beside this many busy-looping processes")
	flag.BoolVar(&list, "list", false, "list every stalled sync (start from the probe's start, duration)")
	flag.Parse()
	err := run(p, "idle CPUs", list)
	if err == nil && busy > 0 {
		err = runBusy(p, busy, list)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "diskprobe:", err)
		os.Exit(1)
	}
}

// runBusy runs the probe beside busy processes, and stops them before it
// returns, whatever happened.
func runBusy(p loadtest.DiskProbe, busy int, list bool) error {
	ctx, cancel := context.WithCancel(context.Background())
	var cmds []*exec.Cmd
	defer func() {
		cancel() // kills them
		for _, cmd := range cmds {
			_ = cmd.Wait()
		}
	}()
	for range busy {
		// A separate process, so the kernel schedules it against the
		// probe's threads (busy goroutines would only compete for Ps).
		cmd := exec.CommandContext(ctx, "sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			return err
		}
		cmds = append(cmds, cmd)
	}
	time.Sleep(300 * time.Millisecond)
	return run(p, fmt.Sprintf("%d busy processes", busy), list)
}

func run(p loadtest.DiskProbe, label string, list bool) error {
	facts, stalls, err := p.Run()
	if err != nil {
		return err
	}
	fmt.Printf("%s: %s\n", label, facts)
	if list {
		for _, s := range stalls {
			fmt.Printf("  stall at %8.1f ms: %5.1f ms\n", float64(s.At.Microseconds())/1e3, float64(s.Took.Microseconds())/1e3)
		}
	}
	return nil
}
