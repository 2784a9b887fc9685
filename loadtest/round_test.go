package loadtest

import (
	"context"
	"io"
	"net"
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
		s, err := RoundProbe{Leader: leader, Warmup: 20 * time.Millisecond, Duration: 200 * time.Millisecond}.Run(context.Background())
		if err != nil {
			t.Fatalf("sync=%v: %v", sync, err)
		}
		if s.Count < 10 || s.P50Ms <= 0 || s.MaxMs < s.P50Ms || s.Rate <= 0 {
			t.Fatalf("sync=%v: implausible rounds %+v", sync, s)
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
