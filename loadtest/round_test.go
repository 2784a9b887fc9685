package loadtest

import (
	"context"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// startReplica serves one probe replica on a fresh loopback port until the
// test ends.
func startReplica(t *testing.T, cfg ReplicaConfig) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeRoundReplica(ctx, ln, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("replica: %v", err)
		}
	})
	return ln.Addr().String()
}

func TestRoundProbeMeasuresQuorumRounds(t *testing.T) {
	for _, sync := range []bool{false, true} {
		dir := t.TempDir()
		f1 := startReplica(t, ReplicaConfig{Dir: dir, Sync: sync})
		f2 := startReplica(t, ReplicaConfig{Dir: dir, Sync: sync})
		leader := startReplica(t, ReplicaConfig{Dir: dir, Sync: sync, Followers: []string{f1, f2}})
		f, err := RoundProbe{Leader: leader, Warmup: 20 * time.Millisecond, Duration: 200 * time.Millisecond}.Run(context.Background())
		if err != nil {
			t.Fatalf("sync=%v: %v", sync, err)
		}
		s := f.Rounds
		if s.Count < 10 || s.P50Ms <= 0 || s.MaxMs < s.P50Ms || s.Rate <= 0 || f.Ceiling <= 0 || f.SlowPerSec < 0 {
			t.Fatalf("sync=%v: implausible rounds %+v", sync, f)
		}
	}
}

// silentFollower accepts the leader and reads what it forwards but never
// acknowledges: a leader without a second replica must not answer.
func silentFollower(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	return ln.Addr().String()
}

func TestRoundProbeWaitsForAFollower(t *testing.T) {
	dir := t.TempDir()
	leader := startReplica(t, ReplicaConfig{Dir: dir, Sync: true, Followers: []string{silentFollower(t), silentFollower(t)}})
	_, err := RoundProbe{Leader: leader, Duration: 100 * time.Millisecond, Timeout: 150 * time.Millisecond}.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "round 1") {
		t.Fatalf("a leader with no acknowledging follower answered: err = %v", err)
	}
	// One follower that acknowledges is a quorum with the leader.
	f := startReplica(t, ReplicaConfig{Dir: dir, Sync: true})
	leader = startReplica(t, ReplicaConfig{Dir: dir, Sync: true, Followers: []string{silentFollower(t), f}})
	if _, err := (RoundProbe{Leader: leader, Duration: 100 * time.Millisecond}).Run(context.Background()); err != nil {
		t.Fatalf("leader and one follower: %v", err)
	}
}

func TestRoundProbeLeaderCannotReachFollower(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	leader := startReplica(t, ReplicaConfig{Dir: t.TempDir(), Followers: []string{gone, gone}})
	if _, err := (RoundProbe{Leader: leader, Duration: 50 * time.Millisecond, Timeout: 2 * time.Second}).Run(context.Background()); err == nil {
		t.Fatal("a leader that cannot reach its followers answered")
	}
}

// TestMain lets ProbeRounds start this test binary as a replica.
func TestMain(m *testing.M) {
	RoundReplicaMain()
	os.Exit(m.Run())
}

func TestProbeRoundsAsProcesses(t *testing.T) {
	for _, sync := range []bool{false, true} {
		f, err := ProbeRounds(context.Background(), t.TempDir(), sync, 50*time.Millisecond, 300*time.Millisecond)
		if err != nil {
			t.Fatalf("sync=%v: %v", sync, err)
		}
		if f.Sync != sync || f.Rounds.Count < 10 || f.Ceiling <= 0 || f.Ceiling > 1e6 {
			t.Fatalf("sync=%v: implausible %+v", sync, f)
		}
		if !strings.Contains(f.String(), "hand-offs/s") {
			t.Fatalf("String() = %q", f.String())
		}
	}
	var m Machine
	m.ProbeFloor(context.Background(), t.TempDir(), 200*time.Millisecond)
	if m.Floor == nil || !m.Floor.Sync || !strings.HasPrefix(m.FloorLine(), "Floor of one replicated durable write") {
		t.Fatalf("ProbeFloor: %+v %q", m.Floor, m.FloorError)
	}
}

func TestFloorMultiple(t *testing.T) {
	f := RoundFacts{Sync: true, Rounds: Stats{P50Ms: 0.5, MeanMs: 0.6}, Ceiling: 1000 / 0.6}
	one := &Result{Scenario: "uncontended", Clients: 1, Ops: map[string]Stats{"acquire": {P50Ms: 1.0}}}
	if got := f.FloorMultiple(one); got != 2 {
		t.Fatalf("one client: %v, want 2", got)
	}
	cont := &Result{Scenario: "contended", Clients: 32, Metrics: map[string]float64{"handoffs_per_s": 1000 / 1.2}}
	if got := f.FloorMultiple(cont); got < 1.999 || got > 2.001 {
		t.Fatalf("contended: %v, want 2", got)
	}
	for _, r := range []*Result{
		nil,
		{Scenario: "uncontended", Clients: 256, Ops: one.Ops},          // not one client
		{Scenario: "uncontended", Clients: 1, Rate: 100, Ops: one.Ops}, // open loop
		{Scenario: "contended", Metrics: map[string]float64{}},         // no hand-offs
		{Scenario: "contended", Unsupported: "no", Metrics: cont.Metrics},
	} {
		if got := f.FloorMultiple(r); got != 0 {
			t.Fatalf("%+v: %v, want 0", r, got)
		}
	}
	if got := (RoundFacts{}).FloorMultiple(one); got != 0 {
		t.Fatalf("no floor: %v, want 0", got)
	}
}

func TestHistCountOver(t *testing.T) {
	h := NewHist()
	for _, d := range []time.Duration{time.Millisecond, 4 * time.Millisecond, 6 * time.Millisecond, 20 * time.Millisecond} {
		h.Record(d)
	}
	if got := h.CountOver(5 * time.Millisecond); got != 2 {
		t.Fatalf("CountOver(5ms) = %d, want 2", got)
	}
	if got := h.CountOver(time.Minute); got != 0 {
		t.Fatalf("CountOver(1m) = %d, want 0", got)
	}
}
