package raftnode

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	pb "github.com/lni/dragonboat/v4/raftpb"
)

// Messages of shard 3 from the leader (replica 1, term 4) to replica 2,
// whose log ends at 10; the leader has just committed 10.
func commitOnly(commit uint64) pb.Message {
	return pb.Message{Type: pb.Replicate, ShardID: 3, From: 1, To: 2, Term: 4, LogIndex: 10, LogTerm: 4, Commit: commit}
}

func withEntries(logIndex, commit uint64) pb.Message {
	return pb.Message{Type: pb.Replicate, ShardID: 3, From: 1, To: 2, Term: 4, LogIndex: logIndex, LogTerm: 4, Commit: commit,
		Entries: []pb.Entry{{Index: logIndex + 1, Term: 4}}}
}

// describe names each message by its type and the fields the hold reads.
func describe(ms []pb.Message) string {
	var parts []string
	for _, m := range ms {
		parts = append(parts, fmt.Sprintf("%v s%d to%d t%d li%d c%d e%d", m.Type, m.ShardID, m.To, m.Term, m.LogIndex, m.Commit, len(m.Entries)))
	}
	return strings.Join(parts, "; ")
}

// A commit-only Replicate is held; what comes next to the same replica of
// the same shard either carries its commit (and the held one is dropped)
// or is sent after it, never before it.
func TestCommitHoldDropsOrSendsInOrder(t *testing.T) {
	heartbeat := func(commit uint64) pb.Message {
		return pb.Message{Type: pb.Heartbeat, ShardID: 3, From: 1, To: 2, Term: 4, Commit: commit}
	}
	otherShard := commitOnly(10)
	otherShard.ShardID = 5
	otherReplica := commitOnly(10)
	otherReplica.To = 3
	newTerm := withEntries(10, 10)
	newTerm.Term = 5
	timeoutNow := pb.Message{Type: pb.TimeoutNow, ShardID: 3, From: 1, To: 2, Term: 4}
	readIndexResp := pb.Message{Type: pb.ReadIndexResp, ShardID: 3, From: 1, To: 2, Term: 4, LogIndex: 10}
	for _, tc := range []struct {
		name  string
		later pb.Message
		want  []pb.Message // sent once the later message is
	}{
		{"the next entries carry the commit", withEntries(10, 10), []pb.Message{withEntries(10, 10)}},
		{"the next entries carry a later commit", withEntries(11, 11), []pb.Message{withEntries(11, 11)}},
		{"a newer commit-only Replicate replaces it", commitOnly(11), nil},
		{"a heartbeat carries the commit", heartbeat(10), []pb.Message{heartbeat(10)}},
		{"a heartbeat behind the commit (match lags)", heartbeat(9), []pb.Message{commitOnly(10), heartbeat(9)}},
		{"a retry from an earlier index", withEntries(8, 10), []pb.Message{commitOnly(10), withEntries(8, 10)}},
		{"a message of a new term", newTerm, []pb.Message{commitOnly(10), newTerm}},
		{"leader transfer", timeoutNow, []pb.Message{commitOnly(10), timeoutNow}},
		{"a read index answer", readIndexResp, []pb.Message{commitOnly(10), readIndexResp}},
		{"another shard's message", otherShard, nil},
		{"another replica's message", otherReplica, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newCommitHold(time.Millisecond)
			t0 := time.Unix(1000, 0)
			if out := h.admit(nil, []pb.Message{commitOnly(10)}, t0); len(out) != 0 {
				t.Fatalf("sent at once: %s", describe(out))
			}
			out := h.admit(nil, []pb.Message{tc.later}, t0.Add(time.Millisecond/2))
			if describe(out) != describe(tc.want) {
				t.Fatalf("sent %q, want %q", describe(out), describe(tc.want))
			}
		})
	}
}

// Several messages of one batch: a held message goes out just ahead of
// the first of its shard and replica that does not supersede it, and the
// messages of other shards keep their order around it.
func TestCommitHoldKeepsBatchOrder(t *testing.T) {
	h := newCommitHold(time.Millisecond)
	t0 := time.Unix(1000, 0)
	other := withEntries(20, 20)
	other.ShardID = 5
	probe := withEntries(7, 10)
	h.admit(nil, []pb.Message{commitOnly(10)}, t0)
	out := h.admit(nil, []pb.Message{other, probe, withEntries(8, 11)}, t0)
	want := []pb.Message{other, commitOnly(10), probe, withEntries(8, 11)}
	if describe(out) != describe(want) {
		t.Fatalf("sent %q, want %q", describe(out), describe(want))
	}
	if _, ok := h.next(); ok {
		t.Fatal("a message is still held")
	}
}

// A held message nothing replaced is released once due: by the timer's
// due call, or at the end of the next batch to the peer of any shard.
func TestCommitHoldReleasesWhenDue(t *testing.T) {
	h := newCommitHold(time.Millisecond)
	t0 := time.Unix(1000, 0)
	second := commitOnly(10)
	second.ShardID = 5
	h.admit(nil, []pb.Message{commitOnly(10)}, t0)
	h.admit(nil, []pb.Message{second}, t0.Add(time.Millisecond/2))
	if first, ok := h.next(); !ok || !first.Equal(t0.Add(time.Millisecond)) {
		t.Fatalf("next due %v %v, want %v", first, ok, t0.Add(time.Millisecond))
	}
	if out := h.due(nil, t0.Add(time.Millisecond-1)); len(out) != 0 {
		t.Fatalf("released early: %s", describe(out))
	}
	if out := h.due(nil, t0.Add(time.Millisecond)); describe(out) != describe([]pb.Message{commitOnly(10)}) {
		t.Fatalf("released %q when the first was due", describe(out))
	}
	other := withEntries(20, 20)
	other.ShardID = 7
	out := h.admit(nil, []pb.Message{other}, t0.Add(2*time.Millisecond))
	if describe(out) != describe([]pb.Message{other, second}) {
		t.Fatalf("sent %q; the due message should join the batch after it", describe(out))
	}
	if _, ok := h.next(); ok {
		t.Fatal("a message is still held")
	}
}

// Counters account for every held message: dropped, released or discarded.
func TestCommitHoldCounts(t *testing.T) {
	before := Passes()
	h := newCommitHold(time.Millisecond)
	t0 := time.Unix(1000, 0)
	h.admit(nil, []pb.Message{commitOnly(10)}, t0)
	h.admit(nil, []pb.Message{withEntries(10, 10)}, t0) // drops it
	h.admit(nil, []pb.Message{commitOnly(11)}, t0)
	h.due(nil, t0.Add(time.Second)) // releases it
	h.admit(nil, []pb.Message{commitOnly(12)}, t0)
	h.discard()
	after := Passes()
	got := [4]uint64{after.HeldCommits - before.HeldCommits, after.DroppedCommits - before.DroppedCommits,
		after.ReleasedCommits - before.ReleasedCommits, after.DiscardedCommits - before.DiscardedCommits}
	if got != [4]uint64{3, 1, 1, 1} {
		t.Fatalf("held, dropped, released, discarded = %v, want [3 1 1 1]", got)
	}
}

// Through a real connection: a held message arrives on its own when its
// hold ends, one replaced by a later message never arrives, and closing
// the stream discards what is held and stops the timer.
func TestTransportHoldsCommitOnlyReplicates(t *testing.T) {
	rec := &recorder{got: make(chan struct{}, 8)}
	_, addr := startTransport(t, rec)
	sender, _ := startTransport(t, &recorder{got: make(chan struct{}, 1)})
	hdr := pb.MessageBatch{DeploymentId: 7070, SourceAddress: "127.0.0.1:7170", BinVer: 210}
	batch := func(ms ...pb.Message) pb.MessageBatch { b := hdr; b.Requests = ms; return b }

	sender.hold = time.Millisecond
	conn, err := sender.GetConnection(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.SendMessageBatch(batch(commitOnly(10))); err != nil {
		t.Fatal(err)
	}
	waitBatches(t, rec, 1) // the timer sent it
	conn.Close()

	sender.hold = time.Hour // nothing is released by time below
	conn, err = sender.GetConnection(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	before := Passes()
	for _, b := range []pb.MessageBatch{batch(commitOnly(11)), batch(withEntries(10, 11)), batch(commitOnly(12))} {
		if err := conn.SendMessageBatch(b); err != nil {
			t.Fatal(err)
		}
	}
	waitBatches(t, rec, 2)
	conn.Close() // discards commitOnly(12)
	after := Passes()
	if d := after.DiscardedCommits - before.DiscardedCommits; d != 1 {
		t.Fatalf("%d held messages discarded at close, want 1", d)
	}
	sender.mu.Lock()
	left := len(sender.pairs)
	sender.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d peer connections left after the stream closed", left)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	got := append(append([]pb.Message(nil), rec.batches[0].Requests...), rec.batches[1].Requests...)
	if want := []pb.Message{commitOnly(10), withEntries(10, 11)}; describe(got) != describe(want) || len(rec.batches) != 2 {
		t.Fatalf("%d batches arrived with %q, want %q", len(rec.batches), describe(got), describe(want))
	}
	if b := rec.batches[0]; b.DeploymentId != 7070 || b.SourceAddress != "127.0.0.1:7170" || b.BinVer != 210 {
		t.Fatalf("the timer's batch is addressed %+v", b)
	}
}
