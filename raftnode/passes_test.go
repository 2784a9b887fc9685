package raftnode

import (
	"testing"

	"github.com/lni/dragonboat/v4/raftio"
	pb "github.com/lni/dragonboat/v4/raftpb"
)

func TestBatchShardsCountsRunsOfOneShard(t *testing.T) {
	msgs := func(ids ...uint64) []pb.Message {
		var m []pb.Message
		for _, id := range ids {
			m = append(m, pb.Message{ShardID: id})
		}
		return m
	}
	cases := []struct {
		name string
		msgs []pb.Message
		want uint64
	}{
		{"empty", nil, 0},
		{"one message", msgs(7), 1},
		{"one shard", msgs(3, 3, 3), 1},
		{"shard after shard", msgs(1, 1, 2, 3, 3), 3},
		{"shard 0 first", msgs(0, 0, 5), 2},
		{"a shard seen twice apart counts twice", msgs(1, 2, 1), 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := batchShards(c.msgs); got != c.want {
				t.Fatalf("batchShards = %d, want %d", got, c.want)
			}
		})
	}
}

// stubLogDB records the updates it was given; the other methods are never
// called here.
type stubLogDB struct {
	raftio.ILogDB
	got [][]pb.Update
}

func (s *stubLogDB) SaveRaftState(u []pb.Update, _ uint64) error {
	s.got = append(s.got, u)
	return nil
}

func TestCountingLogDBCountsShardsPerSave(t *testing.T) {
	stub := &stubLogDB{}
	db := countingLogDB{stub}
	before := Passes()
	updates := []pb.Update{
		{ShardID: 1, EntriesToSave: make([]pb.Entry, 2)},
		{ShardID: 2},
		{ShardID: 3, EntriesToSave: make([]pb.Entry, 1)},
	}
	if err := db.SaveRaftState(updates, 1); err != nil {
		t.Fatal(err)
	}
	if err := db.SaveRaftState(nil, 1); err != nil {
		t.Fatal(err)
	}
	if len(stub.got) != 2 || len(stub.got[0]) != 3 {
		t.Fatalf("the store got %v, want the updates passed through", stub.got)
	}
	after := Passes()
	// Other tests of the package may save at the same time: at least these.
	if d := after.Saves - before.Saves; d < 2 {
		t.Errorf("saves +%d, want ≥ 2", d)
	}
	if d := after.SavedShards - before.SavedShards; d < 3 {
		t.Errorf("saved shards +%d, want ≥ 3", d)
	}
	if d := after.SavedEntryShards - before.SavedEntryShards; d < 2 {
		t.Errorf("saved shards with entries +%d, want ≥ 2", d)
	}
	if d := after.SavedEntries - before.SavedEntries; d < 3 {
		t.Errorf("saved entries +%d, want ≥ 3", d)
	}
}
