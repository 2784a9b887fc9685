package raftnode

import (
	"sync/atomic"
	"testing"

	pb "github.com/lni/dragonboat/v4/raftpb"
)

// replicate is a leader's Replicate of n entries after index logIndex,
// with the leader's commit index commit.
func replicate(shard, logIndex, commit uint64, n int) pb.Message {
	return pb.Message{Type: pb.Replicate, ShardID: shard, From: 1, To: 2, LogIndex: logIndex, Commit: commit,
		Entries: make([]pb.Entry, n)}
}

// testShards hands out shard ids no other test of the process uses: what
// was sent is process-wide, and tests may run more than once (-count).
var testShards atomic.Uint64

func freshShard() uint64 { return 1<<40 + testShards.Add(1) }

func TestIdleReplicate(t *testing.T) {
	cases := []struct {
		name string
		msgs []pb.Message
		want uint64
	}{
		{"no messages", nil, 0},
		{"entries on an idle pipeline", []pb.Message{replicate(5, 10, 10, 2)}, 12},
		{"one per follower", []pb.Message{replicate(5, 10, 10, 2), replicate(5, 10, 10, 2)}, 12},
		{"entries behind uncommitted ones (pipelined)", []pb.Message{replicate(5, 10, 8, 2)}, 0},
		{"commit only", []pb.Message{replicate(5, 10, 10, 0)}, 0},
		{"a follower's answer", []pb.Message{{Type: pb.ReplicateResp, ShardID: 5, LogIndex: 12}}, 0},
		{"a heartbeat", []pb.Message{{Type: pb.Heartbeat, ShardID: 5, Commit: 12}}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := pb.Update{ShardID: 5, Messages: c.msgs}
			if got := idleReplicate(&u); got != c.want {
				t.Fatalf("idleReplicate = %d, want %d", got, c.want)
			}
		})
	}
}

func TestNoteSentKeepsTheHighestIndex(t *testing.T) {
	shard := freshShard()
	noteSent([]pb.Message{replicate(shard, 20, 20, 3), {Type: pb.Heartbeat, ShardID: shard, Commit: 99}})
	if got := sentUpTo(shard); got != 23 {
		t.Fatalf("after a Replicate of 21..23: %d, want 23", got)
	}
	noteSent([]pb.Message{replicate(shard, 5, 5, 1), replicate(shard, 20, 20, 0)})
	if got := sentUpTo(shard); got != 23 {
		t.Fatalf("after an older Replicate and a commit-only one: %d, want 23", got)
	}
	if got := sentUpTo(freshShard()); got != 0 {
		t.Fatalf("a shard never sent: %d, want 0", got)
	}
}

// A save yields for an idle pipeline's Replicate that no send goroutine
// has framed yet, and only then; the store gets the updates either way.
func TestSaveYieldsForAnUnsentIdleReplicate(t *testing.T) {
	shard := freshShard()
	stub := &stubLogDB{}
	db := countingLogDB{stub}
	save := func(u pb.Update) uint64 {
		t.Helper()
		before := Passes().SendFirstYields
		if err := db.SaveRaftState([]pb.Update{u}, 1); err != nil {
			t.Fatal(err)
		}
		return Passes().SendFirstYields - before
	}
	entries := make([]pb.Entry, 1)
	if n := save(pb.Update{ShardID: shard, EntriesToSave: entries, Messages: []pb.Message{replicate(shard, 30, 30, 1)}}); n != 1 {
		t.Errorf("unsent idle Replicate: %d yields, want 1", n)
	}
	noteSent([]pb.Message{replicate(shard, 30, 30, 1)})
	if n := save(pb.Update{ShardID: shard, EntriesToSave: entries, Messages: []pb.Message{replicate(shard, 30, 30, 1)}}); n != 0 {
		t.Errorf("a Replicate already framed: %d yields, want 0", n)
	}
	if n := save(pb.Update{ShardID: shard, EntriesToSave: entries, Messages: []pb.Message{replicate(shard, 31, 29, 1)}}); n != 0 {
		t.Errorf("a pipelined Replicate: %d yields, want 0", n)
	}
	if n := save(pb.Update{ShardID: shard, EntriesToSave: entries}); n != 0 {
		t.Errorf("a follower's save: %d yields, want 0", n)
	}
	if len(stub.got) != 4 {
		t.Fatalf("the store got %d saves, want 4", len(stub.got))
	}
}

// The transport notes the Replicates it writes.
func TestTransportNotesReplicates(t *testing.T) {
	shard := freshShard()
	rec := &recorder{got: make(chan struct{}, 1)}
	_, addr := startTransport(t, rec)
	conn := connectTo(t, addr)
	b := batchWith([]byte("x"))
	b.Requests[0] = replicate(shard, 41, 41, 2)
	if err := conn.SendMessageBatch(b); err != nil {
		t.Fatal(err)
	}
	if got := sentUpTo(shard); got != 43 {
		t.Fatalf("after sending entries 42..43: %d, want 43", got)
	}
}
