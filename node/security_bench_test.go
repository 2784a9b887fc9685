package node_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/router"
	"github.com/wardenlock/warden/wire"
)

// BenchmarkFloods measures well-behaved clients' latency (acquire + release
// of a lock, then a KV read, through the Go client: 4 goroutines) while an
// attacker process floods node 1 with default limits: first nothing
// (baseline), then a connection flood (8 goroutines dialling as fast as they
// can, never finishing the handshake, keeping 64 each open), then an
// oversized-frame flood (8 connections that say hello and then send 2 MiB
// frames against the 1 MiB limit). Each phase is measured for 3 s; the
// flood counters say what the protections did meanwhile (router/flood.go).
func BenchmarkFloods(b *testing.B) {
	c := nodetest.Start(b, nodetest.Options{})
	target := c.AllEndpoints()[0]
	ctx := context.Background()
	cl, err := client.New(ctx, c.AllEndpoints(), client.WithRequestTimeout(15*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	for _, phase := range []string{"baseline", "conn-flood", "oversize-flood"} {
		var attacker *exec.Cmd
		var out bytes.Buffer
		if phase != "baseline" {
			// The attacker is another process, so it competes with the node
			// for CPU and sockets as a remote one would, not for the Go
			// scheduler of the node's own process.
			attacker = exec.Command(os.Args[0], "-test.run=^TestFloodAttackerProcess$")
			attacker.Env = append(os.Environ(), "WARDEN_FLOOD_MODE="+phase, "WARDEN_FLOOD_TARGET="+target, "WARDEN_FLOOD_FOR=3500ms")
			attacker.Stdout = &out
			if err := attacker.Start(); err != nil {
				b.Fatal(err)
			}
			time.Sleep(500 * time.Millisecond) // let the flood build up
		}
		stats := router.ReadFloodStats()
		cpu0 := processCPU()
		lat := wellBehaved(b, cl, phase, 3*time.Second)
		// CPU the node's process (the cluster and the well-behaved
		// clients; the attacker is another process) spent per second of the
		// phase: what the flood costs the server, much less sensitive to
		// the machine's load than latency.
		b.ReportMetric(float64(processCPU()-cpu0)/float64(3*time.Millisecond), phase+"-cpu-ms/s")
		p := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))]) / 1e6 }
		b.ReportMetric(p(0.50), phase+"-p50-ms")
		b.ReportMetric(p(0.99), phase+"-p99-ms")
		b.ReportMetric(float64(len(lat))/3, phase+"-ops/s")
		if attacker != nil {
			attacker.Wait()
			var attacks int64
			fmt.Sscanf(out.String()[strings.Index(out.String(), "attacks ")+len("attacks "):], "%d", &attacks)
			b.ReportMetric(float64(attacks)/3.5, phase+"-attacks/s")
			// What the protections did during the measured 3 s.
			after := router.ReadFloodStats()
			b.ReportMetric(float64(after.ConnsRefused-stats.ConnsRefused)/3, phase+"-refused/s")
			b.ReportMetric(float64(after.AcceptsPaced-stats.AcceptsPaced)/3, phase+"-paced/s")
			b.ReportMetric(float64(after.ReadsThrottled-stats.ReadsThrottled)/3, phase+"-throttled/s")
			b.ReportMetric(float64(after.OversizeClosed-stats.OversizeClosed)/3, phase+"-oversize-closed/s")
			b.ReportMetric(float64(after.SilentRefusals-stats.SilentRefusals)/3, phase+"-silent/s")
		}
	}
}

// TestFloodAttackerProcess is BenchmarkFloods' attacker, run as a separate
// process of this test binary; it does nothing in a normal test run.
func TestFloodAttackerProcess(t *testing.T) {
	mode := os.Getenv("WARDEN_FLOOD_MODE")
	if mode == "" {
		t.Skip("helper process for BenchmarkFloods")
	}
	target := os.Getenv("WARDEN_FLOOD_TARGET")
	d, _ := time.ParseDuration(os.Getenv("WARDEN_FLOOD_FOR"))
	stop := make(chan struct{})
	time.AfterFunc(d, func() { close(stop) })
	var n atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if mode == "conn-flood" {
				connFlood(target, stop, &n)
			} else {
				oversizeFlood(target, stop, &n)
			}
		}()
	}
	wg.Wait()
	fmt.Printf("attacks %d\n", n.Load())
}

// wellBehaved runs 4 clients' lock/unlock and get loops for d and returns
// the sorted latencies.
func wellBehaved(b *testing.B, cl *client.Client, tag string, d time.Duration) []time.Duration {
	var mu sync.Mutex
	var lat []time.Duration
	var failed atomic.Int64
	defer func() { b.ReportMetric(float64(failed.Load()), tag+"-errors") }()
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := fmt.Sprintf("/bench/flood/%s-%d", tag, g)
			for time.Now().Before(deadline) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				start := time.Now()
				l, err := cl.Acquire(ctx, path, 10*time.Second)
				if err == nil {
					err = l.Release(ctx)
				}
				if err == nil {
					_, err = cl.Get(ctx, path)
					if errors.Is(err, client.ErrNotFound) {
						err = nil
					}
				}
				cancel()
				if err != nil {
					failed.Add(1)
					b.Logf("%s: well-behaved client: %v after %v", tag, err, time.Since(start))
					continue
				}
				mu.Lock()
				lat = append(lat, time.Since(start))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) == 0 {
		b.Fatal("no operation completed")
	}
	return lat
}

// connFlood opens connections that never say hello, as fast as it can.
func connFlood(addr string, stop <-chan struct{}, n *atomic.Int64) {
	var open []net.Conn
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for {
		select {
		case <-stop:
			return
		default:
		}
		nc, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			time.Sleep(time.Millisecond)
			continue
		}
		n.Add(1)
		open = append(open, nc)
		if len(open) >= 64 {
			open[0].Close()
			open = open[1:]
		}
	}
}

// oversizeFlood sends frames twice the limit, forever.
func oversizeFlood(addr string, stop <-chan struct{}, n *atomic.Int64) {
	body := make([]byte, 2<<20)
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(body)))
	hello, _ := wire.AppendFrame(nil, &wire.Request{ID: 1, Op: wire.OpHello, Rev: wire.ProtocolVersion})
	for {
		select {
		case <-stop:
			return
		default:
		}
		nc, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			time.Sleep(time.Millisecond)
			continue
		}
		go func() {
			buf := make([]byte, 4096)
			for {
				if _, err := nc.Read(buf); err != nil {
					return
				}
			}
		}()
		nc.Write(hello)
		for {
			select {
			case <-stop:
				nc.Close()
				return
			default:
			}
			nc.SetWriteDeadline(time.Now().Add(2 * time.Second))
			if _, err := nc.Write(hdr[:]); err != nil {
				break
			}
			if _, err := nc.Write(body); err != nil {
				break
			}
			n.Add(1)
		}
		nc.Close()
	}
}

// processCPU is the user+system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
