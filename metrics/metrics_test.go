package metrics_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/lease"
	"github.com/wardenlock/warden/node"
	"github.com/wardenlock/warden/node/nodetest"
)

// scrape reads every node's /metrics and returns each series' value summed
// over the nodes, keyed by `name{labels}` as Prometheus prints it.
func scrape(t *testing.T, c *nodetest.Cluster) (sum map[string]float64, perNode []map[string]float64) {
	t.Helper()
	return scrapeNodes(t, c.Nodes)
}

func scrapeNodes(t *testing.T, nodes []*node.Node) (sum map[string]float64, perNode []map[string]float64) {
	t.Helper()
	sum = map[string]float64{}
	for _, n := range nodes {
		resp, err := http.Get("http://" + n.Admin.Addr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		one := map[string]float64{}
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			line := sc.Text()
			if line == "" || line[0] == '#' {
				continue
			}
			i := strings.LastIndexByte(line, ' ')
			v, err := strconv.ParseFloat(line[i+1:], 64)
			if err != nil {
				t.Fatalf("bad exposition line %q", line)
			}
			one[line[:i]] = v
			sum[line[:i]] += v
		}
		perNode = append(perNode, one)
	}
	return sum, perNode
}

// series sums every series of a metric whose labels include all of want.
// dial is a client of c's nodes and a context for the test's calls,
// both ended when the test ends.
func dial(t *testing.T, c *nodetest.Cluster, timeout time.Duration) (context.Context, *client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	cl, err := client.New(ctx, c.Endpoints())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return ctx, cl
}

func series(m map[string]float64, name string, want ...string) float64 {
	var total float64
	for k, v := range m {
		if k != name && !strings.HasPrefix(k, name+"{") {
			continue
		}
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(k, w)
		}
		if ok {
			total += v
		}
	}
	return total
}

func TestScrapeAfterKnownTraffic(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Shards: 2, Edit: func(cfg *node.Config) { cfg.AdminAddr = "127.0.0.1:0" }})
	ctx, cl := dial(t, c, 90*time.Second)
	// Leader-reported counts are exact only while leadership stays put: let
	// the start-up elections and leader balancing settle first, and run the
	// traffic again (on new paths) if an election still came during it.
	const acquires = 6
	var before, after map[string]float64
	var perNode []map[string]float64
	for attempt := 1; ; attempt++ {
		stableLeaders(t, c, []uint64{2, 3}, 2*time.Second)
		var held *client.Lock
		before, after, perNode, held = knownTraffic(t, ctx, c, cl, attempt, acquires)
		terms := series(after, "warden_raft_term") - series(before, "warden_raft_term")
		if terms == 0 {
			break
		}
		if attempt == 3 {
			t.Fatalf("an election came during each of %d attempts (terms +%v in the last)", attempt, terms)
		}
		t.Logf("attempt %d: an election came during the traffic (terms +%v): counts are the leader's, run again", attempt, terms)
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		waitSeries(t, c, "warden_locks_held", 0)
		waitSeries(t, c, "warden_leases_active", 0)
	}
	delta := func(name string, labels ...string) float64 {
		return series(after, name, labels...) - series(before, name, labels...)
	}
	tests := []struct {
		name string
		got  float64
		want float64
	}{
		{"acquire requests answered ok", delta("warden_requests_total", `op="acquire"`, `code="ok"`), acquires},
		{"acquire requests refused", delta("warden_requests_total", `op="acquire"`, `code="conflict"`), 1},
		{"release requests", delta("warden_requests_total", `op="release"`, `code="ok"`), acquires - 2},
		{"acquire latencies recorded", delta("warden_request_duration_seconds_count", `op="acquire"`), acquires + 1},
		{"direct grants", delta("warden_locks_granted_total", `cause="direct"`), acquires},
		{"releases", delta("warden_locks_released_total", `cause="released"`), acquires - 2},
		{"expired lock", delta("warden_locks_released_total", `cause="expired"`), 1},
		{"expired lease", delta("warden_lease_ended_total", `cause="expired"`), 1},
		{"leases created", delta("warden_lease_created_total"), acquires},
		{"locks held", series(after, "warden_locks_held"), 1},
		{"leases live", series(after, "warden_leases_active"), 1},
		{"shard leaders (meta + 2 data)", series(after, "warden_raft_is_leader"), 3},
		{"every replica knows its leader", series(after, "warden_raft_has_leader"), 9},
		{"build info", series(after, "warden_build_info"), 3},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	if n := series(after, "warden_raft_apply_duration_seconds_count"); n < acquires {
		t.Errorf("apply latencies recorded: %v, want >= %d", n, acquires)
	}
	for i, m := range perNode {
		for k := range m {
			if strings.Contains(k, "/metrics/") || strings.Contains(k, "path=") {
				t.Errorf("node %d: a series is labelled by path: %s", i+1, k)
			}
		}
		if series(m, "warden_raft_log_index", `shard="2"`) == 0 {
			t.Errorf("node %d: no log index for shard 2", i+1)
		}
	}
	// Every replica synced the new entries to its wal log store (the
	// default store of a new data dir).
	for i := range perNode {
		got := series(perNode[i], "warden_wal_sync_duration_seconds_count")
		if got == 0 || series(perNode[i], "warden_wal_sync_duration_seconds_bucket", `le="+Inf"`) != got {
			t.Errorf("node %d: wal syncs %v, +Inf bucket %v", i+1, got,
				series(perNode[i], "warden_wal_sync_duration_seconds_bucket", `le="+Inf"`))
		}
		// Rotations are exported even before the first one.
		for _, name := range []string{"warden_wal_rotation_duration_seconds_count", "warden_wal_rotation_copied_bytes_total"} {
			if _, ok := perNode[i][name]; !ok {
				t.Errorf("node %d: no series %s", i+1, name)
			}
		}
	}
}

// knownTraffic runs the test's known traffic in namespaces of its own
// (attempt tells them apart): 6 single-lock acquires, 4 released, one left
// to expire, one left held (returned); one refused try. It returns the
// scrapes from before it and from once the expiry shows.
func knownTraffic(t *testing.T, ctx context.Context, c *nodetest.Cluster, cl *client.Client, attempt, acquires int) (before, after map[string]float64, perNode []map[string]float64, held *client.Lock) {
	t.Helper()
	before, _ = scrape(t, c)
	var locks []*client.Lock
	for i := 0; i < acquires; i++ {
		ttl := 30 * time.Second
		if i == 0 {
			ttl = time.Second // expires
		}
		l, err := cl.Acquire(ctx, fmt.Sprintf("/metrics/ns%d-%d/job", i, attempt), ttl)
		if err != nil {
			t.Fatal(err)
		}
		locks = append(locks, l)
	}
	for _, l := range locks[2:] {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.Acquire(ctx, fmt.Sprintf("/metrics/ns1-%d/job", attempt), 30*time.Second, client.WithTry()); err == nil {
		t.Fatal("second acquire of a held lock was granted")
	}
	expired := series(before, "warden_lease_ended_total", `cause="expired"`)
	c.WaitFor(15*time.Second, "the 1 s lease's expiry in the metrics", func() error {
		after, perNode = scrape(t, c)
		ended, locksHeld := series(after, "warden_lease_ended_total", `cause="expired"`), series(after, "warden_locks_held")
		if ended < expired+1 || locksHeld != 1 {
			return fmt.Errorf("expired leases %v (were %v), locks held %v", ended, expired, locksHeld)
		}
		return nil
	})
	return before, after, perNode, locks[1]
}

// waitSeries waits until a metric summed over the nodes is want.
func waitSeries(t *testing.T, c *nodetest.Cluster, name string, want float64) {
	t.Helper()
	c.WaitFor(15*time.Second, name, func() error {
		m, _ := scrape(t, c)
		if got := series(m, name); got != want {
			return fmt.Errorf("%v, want %v", got, want)
		}
		return nil
	})
}

// stableLeaders waits until the shards' leaders have not changed for d.
func stableLeaders(t *testing.T, c *nodetest.Cluster, shards []uint64, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last []int
	since := time.Now()
	for time.Now().Before(deadline) {
		var now []int
		for _, id := range shards {
			now = append(now, c.LeaderOf(id))
		}
		if fmt.Sprint(now) != fmt.Sprint(last) || strings.Contains(fmt.Sprint(now), "-1") {
			last, since = now, time.Now()
		} else if time.Since(since) >= d {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("shard leadership did not settle in 30s")
}

// TestApplyDurationIsProposalToApply: warden_raft_apply_duration_seconds
// times each entry from its proposal to its apply on the leader with the
// leader's monotonic clock. With every node's wall clock moved ten minutes
// ahead after start-up, sequential acquires still record durations that
// add up to less than the wall time they took (before, the metric was
// "wall clock minus the entry's replicated-time stamp": that offset, here
// ten minutes, and 50–100 ms on an undisturbed cluster).
func TestApplyDurationIsProposalToApply(t *testing.T) {
	clock := &lease.OffsetClock{}
	c := nodetest.Start(t, nodetest.Options{Shards: 1, Clock: clock, Edit: func(cfg *node.Config) { cfg.AdminAddr = "127.0.0.1:0" }})
	ctx, cl := dial(t, c, 45*time.Second)
	stableLeaders(t, c, []uint64{2}, time.Second)
	clock.Set(10 * time.Minute)
	before, _ := scrape(t, c)
	const acquires = 20
	start := time.Now()
	for i := 0; i < acquires; i++ {
		l, err := cl.Acquire(ctx, fmt.Sprintf("/apply/ns%d/job", i), 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	elapsed := time.Since(start).Seconds()
	after, _ := scrape(t, c)
	delta := func(name string, labels ...string) float64 {
		return series(after, name, labels...) - series(before, name, labels...)
	}
	n := delta("warden_raft_apply_duration_seconds_count", `shard="2"`)
	sum := delta("warden_raft_apply_duration_seconds_sum", `shard="2"`)
	if n < 2*acquires {
		t.Fatalf("%v apply durations recorded for %d acquires and releases, want at least one per entry", n, 2*acquires)
	}
	if sum <= 0 || sum > elapsed {
		t.Fatalf("apply durations add up to %.3f s over %v entries; the operations took %.3f s one after another", sum, n, elapsed)
	}
	if _, ok := after["warden_router_forwarded_total"]; !ok {
		t.Errorf("warden_router_forwarded_total is not exported")
	}
}
