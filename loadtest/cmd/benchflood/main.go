// Command benchflood measures what a hostile identity and a flooded admin
// port cost everyone else: a 3-node cluster of warden processes with TLS
// and a policy; a well-behaved identity runs a lock loop (acquire and
// release) and a prober asks node 1's /livez from 127.0.0.2 on a new
// connection every 100 ms, as a kubelet does. After a baseline phase, the
// flood phase holds 300 idle connections against node 1's admin port from
// 127.0.0.1 (opening a new one whenever the node closes one) while one
// identity sends 50,000 session (lease) requests. It reports the lock
// loop's and the probes' latencies per phase, how many flood requests were
// granted and refused (with their codes), and the connections the admin
// port refused, in OUT/NAME.md and OUT/NAME.json.
//
//	go build -o bin/warden ./cmd/warden
//	go run ./loadtest/cmd/benchflood --warden bin/warden [--out build/bench]
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/wardenlock/warden/admin"
	"github.com/wardenlock/warden/auth"
	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/loadtest"
	"github.com/wardenlock/warden/loadtest/harness"
	"github.com/wardenlock/warden/wire"
)

const policy = `
identities: {root: [admin], worker: [tenant], flooder: [tenant]}
roles:
  admin: [{prefix: /, perms: [all]}]
  tenant: [{prefix: /bench, perms: [lock, read]}]
`

type options struct {
	bin, out, name       string
	port, shards         int
	idle, leases         int
	floodConc, workers   int
	baseline, minFlood   time.Duration
	maxFlood, probeEvery time.Duration
	probeTimeout         time.Duration
	sessionTTL           time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.bin, "warden", "bin/warden", "warden binary")
	flag.StringVar(&o.out, "out", "build/bench", "output directory")
	flag.StringVar(&o.name, "name", "flood", "output file name (NAME.md, NAME.json)")
	flag.IntVar(&o.port, "port", 27500, "first client port (Raft at +100, admin at +250)")
	flag.IntVar(&o.shards, "shards", 8, "data shards")
	flag.IntVar(&o.idle, "idle", 300, "idle connections held against node 1's admin port")
	flag.IntVar(&o.leases, "leases", 50000, "session (lease) requests the flooding identity sends")
	flag.IntVar(&o.floodConc, "flood-concurrency", 64, "flood requests in flight")
	flag.IntVar(&o.workers, "workers", 4, "well-behaved lock loops (one path each)")
	flag.DurationVar(&o.baseline, "baseline", 10*time.Second, "baseline phase")
	flag.DurationVar(&o.minFlood, "min-flood", 10*time.Second, "the flood phase lasts at least this long")
	flag.DurationVar(&o.maxFlood, "max-flood", 3*time.Minute, "and at most this long")
	flag.DurationVar(&o.probeEvery, "probe-every", 100*time.Millisecond, "time between /livez probes")
	flag.DurationVar(&o.probeTimeout, "probe-timeout", 5*time.Second, "a probe without an answer in this time failed (the manifest's timeoutSeconds)")
	flag.DurationVar(&o.sessionTTL, "session-ttl", 10*time.Second, "TTL of the flood's sessions")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.baseline+o.maxFlood+3*time.Minute)
	defer cancel()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "benchflood:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	dir, err := os.MkdirTemp("", "benchflood-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	certs := auth.DevCerts{Dir: filepath.Join(dir, "certs"), Clients: []string{"root", "worker", "flooder"}}
	if err := certs.Generate(); err != nil {
		return err
	}
	polFile := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(polFile, []byte(policy), 0o600); err != nil {
		return err
	}
	adminAddr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", o.port+250+i) }
	g, eps, err := harness.StartWarden(ctx, harness.WardenOptions{Binary: o.bin, Shards: o.shards, BasePort: o.port,
		TLSDir: certs.Dir, Args: []string{"--auth-config", polFile, "--log-level", "warn"},
		NodeArgs: func(i int) []string { return []string{"--admin", adminAddr(i)} }})
	if err != nil {
		return err
	}
	defer g.Stop()
	b := &bench{o: o, certs: certs, endpoints: eps, admin: adminAddr(0)}
	if err := b.connect(ctx); err != nil {
		return err
	}
	defer b.worker.Close()
	rep := report{Machine: loadtest.ThisMachine(), Command: strings.Join(append([]string{"benchflood"}, os.Args[1:]...), " "), Nodes: len(eps), Shards: o.shards,
		AdminLimits: admin.DefaultLimits}
	fmt.Fprintf(os.Stderr, "benchflood: baseline %v\n", o.baseline)
	rep.Baseline = b.phase(ctx, false)
	fmt.Fprintf(os.Stderr, "benchflood: flood (%d idle admin connections, %d session requests)\n", o.idle, o.leases)
	rep.Flood = b.phase(ctx, true)
	if err := ctx.Err(); err != nil {
		return err
	}
	return rep.write(o)
}

type bench struct {
	o         options
	certs     auth.DevCerts
	endpoints []string
	admin     string
	worker    *client.Client
}

func (b *bench) tlsAs(identity string) *tls.Config {
	cert, key := "", ""
	if identity != "" {
		cert, key = b.certs.ClientFiles(identity)
	}
	tc, err := auth.ClientConfig(filepath.Join(b.certs.Dir, auth.CAFile), cert, key)
	if err != nil {
		panic(err) // the files were just written
	}
	tc.ServerName = "127.0.0.1"
	return tc
}

// connect waits until the well-behaved identity can take a lock and node
// 1's admin port says ready.
func (b *bench) connect(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	var err error
	if b.worker, err = client.New(wctx, b.endpoints, client.WithTLS(b.tlsAs("worker"))); err != nil {
		return err
	}
	for {
		var l *client.Lock
		if l, err = b.worker.Acquire(wctx, "/bench/ready", 10*time.Second); err == nil {
			l.Release(wctx)
			if code, _ := b.adminGet(wctx, "root", "/readyz"); code == http.StatusOK {
				return nil
			}
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("cluster not ready: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (b *bench) adminGet(ctx context.Context, identity, path string) (int, []byte) {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: b.tlsAs(identity), DisableKeepAlives: true}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+b.admin+path, nil)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

func (b *bench) connsRefused(ctx context.Context) int64 {
	var st admin.Status
	if _, body := b.adminGet(ctx, "root", "/v1/status"); json.Unmarshal(body, &st) != nil {
		return -1
	}
	return st.AdminConnsRefused
}

// phase runs the lock loop and the prober, with the flood when flood is
// set, and returns what each saw.
func (b *bench) phase(ctx context.Context, flood bool) phaseResult {
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	var locks, probes samples
	refused0 := b.connsRefused(ctx)
	for i := 0; i < b.o.workers; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); b.lockLoop(pctx, fmt.Sprintf("/bench/worker/%d", i), &locks) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); b.probe(pctx, &probes) }()
	res := phaseResult{Name: "baseline"}
	start := time.Now()
	if !flood {
		sleep(ctx, b.o.baseline)
	} else {
		res.Name = "flood"
		var idle idleStats
		for i := 0; i < b.o.idle; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); holdIdle(pctx, b.admin, &idle) }()
		}
		leases := b.leaseFlood(pctx)
		res.Leases = &leases
		if rest := b.o.minFlood - time.Since(start); rest > 0 {
			sleep(ctx, rest)
		}
		res.IdleDials = idle.dials.Load()
	}
	res.Seconds = time.Since(start).Seconds()
	stop()
	wg.Wait()
	res.Locks, res.Probes = locks.summary(res.Seconds), probes.summary(res.Seconds)
	if refused1 := b.connsRefused(ctx); refused0 >= 0 && refused1 >= 0 {
		res.AdminConnsRefused = refused1 - refused0
	}
	return res
}

// lockLoop acquires and releases path until ctx ends; one sample per pair.
func (b *bench) lockLoop(ctx context.Context, path string, s *samples) {
	for ctx.Err() == nil {
		t0 := time.Now()
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		l, err := b.worker.Acquire(rctx, path, 10*time.Second)
		if err == nil {
			err = l.Release(rctx)
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		s.add(time.Since(t0), err)
	}
}

// probe asks /livez anonymously from 127.0.0.2, on a new connection each
// time, every probeEvery.
func (b *bench) probe(ctx context.Context, s *samples) {
	d := &net.Dialer{Timeout: b.o.probeTimeout, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	hc := &http.Client{Timeout: b.o.probeTimeout, Transport: &http.Transport{DialContext: d.DialContext,
		TLSClientConfig: b.tlsAs(""), DisableKeepAlives: true}}
	tick := time.NewTicker(b.o.probeEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		t0 := time.Now()
		resp, err := hc.Get("https://" + b.admin + "/livez")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("HTTP %d", resp.StatusCode)
			}
		}
		if ctx.Err() != nil && err != nil {
			return
		}
		s.add(time.Since(t0), err)
	}
}

type idleStats struct{ dials atomic.Int64 }

// holdIdle keeps one TCP connection to addr open and silent from
// 127.0.0.1, dialling again (after a pause) whenever the node closes it.
func holdIdle(ctx context.Context, addr string, st *idleStats) {
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}}
	for ctx.Err() == nil {
		st.dials.Add(1)
		if c, err := d.DialContext(ctx, "tcp", addr); err == nil {
			unblock := context.AfterFunc(ctx, func() { c.Close() })
			io.Copy(io.Discard, c)
			unblock()
			c.Close()
		}
		sleep(ctx, 200*time.Millisecond)
	}
}

// leaseFlood sends o.leases session requests as the flooding identity,
// floodConc at a time, and keeps the sessions it gets until the phase ends.
func (b *bench) leaseFlood(ctx context.Context) floodResult {
	res := floodResult{Requests: b.o.leases, Codes: map[string]int64{}}
	fl, err := client.New(ctx, b.endpoints, client.WithTLS(b.tlsAs("flooder")))
	if err != nil {
		res.Codes["connect: "+err.Error()] = int64(b.o.leases)
		return res
	}
	defer func() {
		done := make(chan struct{})
		go func() { fl.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
		}
	}()
	var next atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < b.o.floodConc; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.o.leases) && ctx.Err() == nil {
				rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := fl.NewSession(rctx, client.WithTTL(b.o.sessionTTL))
				cancel()
				code := "OK"
				if err != nil {
					code = errorCode(err)
				}
				mu.Lock()
				res.Codes[code]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	for code, n := range res.Codes {
		if code == "OK" {
			res.Granted += n
		} else {
			res.Refused += n
		}
	}
	return res
}

// errorCode names an error by its wire code ("TooMany", "Unauthorized",
// ...), or says what else it is.
func errorCode(err error) string {
	var we *wire.Error
	switch {
	case errors.As(err, &we):
		return we.Code.String()
	case errors.Is(err, context.DeadlineExceeded):
		return "client timeout"
	}
	return "error: " + err.Error()
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// samples are latencies and errors of one kind of operation.
type samples struct {
	mu     sync.Mutex
	lat    []time.Duration
	errors map[string]int64
}

func (s *samples) add(d time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.errors == nil {
			s.errors = map[string]int64{}
		}
		s.errors[errorCode(err)]++
		return
	}
	s.lat = append(s.lat, d)
}

func (s *samples) summary(seconds float64) latency {
	s.mu.Lock()
	defer s.mu.Unlock()
	sort.Slice(s.lat, func(i, j int) bool { return s.lat[i] < s.lat[j] })
	q := func(p float64) float64 {
		if len(s.lat) == 0 {
			return 0
		}
		return float64(s.lat[int(p*float64(len(s.lat)-1))]) / 1e6
	}
	var failed int64
	for _, n := range s.errors {
		failed += n
	}
	l := latency{OK: int64(len(s.lat)), Failed: failed, Errors: s.errors, P50ms: q(0.5), P99ms: q(0.99), MaxMs: q(1)}
	if seconds > 0 {
		l.PerSecond = float64(l.OK) / seconds
	}
	return l
}

type latency struct {
	OK        int64            `json:"ok"`
	Failed    int64            `json:"failed"`
	Errors    map[string]int64 `json:"errors,omitempty"`
	PerSecond float64          `json:"per_second"`
	P50ms     float64          `json:"p50_ms"`
	P99ms     float64          `json:"p99_ms"`
	MaxMs     float64          `json:"max_ms"`
}

type floodResult struct {
	Requests int              `json:"requests"`
	Granted  int64            `json:"granted"`
	Refused  int64            `json:"refused"`
	Codes    map[string]int64 `json:"codes"` // answer code (or error) -> count
	Seconds  float64          `json:"seconds"`
}

type phaseResult struct {
	Name              string       `json:"name"`
	Seconds           float64      `json:"seconds"`
	Locks             latency      `json:"locks"`  // the well-behaved identity's acquire + release pairs
	Probes            latency      `json:"probes"` // node 1's /livez from another address
	Leases            *floodResult `json:"leases,omitempty"`
	IdleDials         int64        `json:"idle_dials,omitempty"`          // idle connections opened against the admin port
	AdminConnsRefused int64        `json:"admin_conns_refused,omitempty"` // of them, reset by node 1's limits
}

type report struct {
	Machine     loadtest.Machine `json:"machine"`
	Command     string           `json:"command"`
	Nodes       int              `json:"nodes"`
	Shards      int              `json:"shards"`
	AdminLimits admin.Limits     `json:"admin_limits"`
	Baseline    phaseResult      `json:"baseline"`
	Flood       phaseResult      `json:"flood"`
}

func (r *report) write(o options) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.out, o.name+".json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	var m strings.Builder
	fmt.Fprintf(&m, "# Admin port and lease flood\n\n`%s`\n\n", r.Command)
	fmt.Fprintf(&m, "%d nodes (TLS, auth on), %d shards; %d CPUs, %.1f GiB, %s; %s.\n\n", r.Nodes, r.Shards,
		r.Machine.NProc, r.Machine.MemGiB, r.Machine.Go, r.Machine.Date)
	m.WriteString("| phase | s | lock pairs/s | lock p50 ms | lock p99 ms | lock max ms | lock errors | /livez ok | /livez failed | /livez p50 ms | /livez p99 ms |\n")
	m.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, p := range []phaseResult{r.Baseline, r.Flood} {
		fmt.Fprintf(&m, "| %s | %.1f | %.0f | %.1f | %.1f | %.1f | %d | %d | %d | %.1f | %.1f |\n", p.Name, p.Seconds,
			p.Locks.PerSecond, p.Locks.P50ms, p.Locks.P99ms, p.Locks.MaxMs, p.Locks.Failed, p.Probes.OK, p.Probes.Failed, p.Probes.P50ms, p.Probes.P99ms)
	}
	if l := r.Flood.Leases; l != nil {
		fmt.Fprintf(&m, "\nFlood: %d session requests from one identity in %.1f s (%.0f/s): %d granted, %d refused.\n\n",
			l.Requests, l.Seconds, float64(l.Granted+l.Refused)/max(l.Seconds, 1e-9), l.Granted, l.Refused)
		m.WriteString("| answer | count |\n| --- | --- |\n")
		codes := make([]string, 0, len(l.Codes))
		for c := range l.Codes {
			codes = append(codes, c)
		}
		sort.Strings(codes)
		for _, c := range codes {
			fmt.Fprintf(&m, "| %s | %d |\n", c, l.Codes[c])
		}
	}
	fmt.Fprintf(&m, "\nIdle connections: %d held against node 1's admin port from 127.0.0.1 (%d dials in the phase); the port reset %d of them (limits: %d per address, %d in all, header timeout %v).\n",
		o.idle, r.Flood.IdleDials, r.Flood.AdminConnsRefused, r.AdminLimits.MaxConnsPerAddr, r.AdminLimits.MaxConns, r.AdminLimits.HeaderTimeout)
	for _, p := range []phaseResult{r.Baseline, r.Flood} {
		for what, l := range map[string]latency{"lock": p.Locks, "/livez": p.Probes} {
			if len(l.Errors) > 0 {
				fmt.Fprintf(&m, "\n%s %s errors: %v\n", p.Name, what, l.Errors)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(o.out, o.name+".md"), []byte(m.String()), 0o644); err != nil {
		return err
	}
	fmt.Print(m.String())
	return nil
}
