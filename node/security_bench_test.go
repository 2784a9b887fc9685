package node_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/node"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/wire"
)

// BenchmarkFloods measures well-behaved clients' latency (acquire + release
// of a lock, and a KV read, through the Go client) while attackers flood
// one node: first nothing (baseline), then a connection flood (dial, never
// finish the handshake, redial when refused or cut), then an oversized-frame
// flood (handshake, then 2 MiB frames against a 1 MiB limit, each answered
// TooLarge and skipped). Each phase runs for 3 s; figures are per phase.
func BenchmarkFloods(b *testing.B) {
	c := nodetest.Start(b, nodetest.Options{Edit: func(cfg *node.Config) {
		cfg.Router.Security.MaxConnsPerAddr = 256
		cfg.Router.Security.HelloTimeout = 2 * time.Second
	}})
	target := c.AllEndpoints()[0]
	ctx := context.Background()
	cl, err := client.New(ctx, c.AllEndpoints(), client.WithRequestTimeout(15*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	phases := []struct {
		name   string
		attack func(stop <-chan struct{}, n *atomic.Int64)
	}{
		{"baseline", nil},
		{"conn-flood", func(stop <-chan struct{}, n *atomic.Int64) { connFlood(target, stop, n) }},
		{"oversize-flood", func(stop <-chan struct{}, n *atomic.Int64) { oversizeFlood(target, stop, n) }},
	}
	for _, ph := range phases {
		stop := make(chan struct{})
		var attacks atomic.Int64
		var wg sync.WaitGroup
		if ph.attack != nil {
			for i := 0; i < 8; i++ {
				wg.Add(1)
				go func() { defer wg.Done(); ph.attack(stop, &attacks) }()
			}
		}
		lat := wellBehaved(b, cl, ph.name, 3*time.Second)
		close(stop)
		wg.Wait()
		p := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))]) / 1e6 }
		b.ReportMetric(p(0.50), ph.name+"-p50-ms")
		b.ReportMetric(p(0.99), ph.name+"-p99-ms")
		b.ReportMetric(float64(len(lat))/3, ph.name+"-ops/s")
		if ph.attack != nil {
			b.ReportMetric(float64(attacks.Load())/3, ph.name+"-attacks/s")
		}
	}
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
