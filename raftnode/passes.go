package raftnode

import (
	"sync/atomic"

	"github.com/lni/dragonboat/v4/config"
	"github.com/lni/dragonboat/v4/raftio"
	pb "github.com/lni/dragonboat/v4/raftpb"
)

// How much of a node's Raft work is shared across shards: a step-worker
// pass saves every shard it stepped in one SaveRaftState call (one write,
// at most one fdatasync), and a transport batch carries messages of several
// shards to one peer. The per-round costs (syncs, socket writes and reads,
// wake-ups) are paid per call and per batch, so the shards a call or a batch
// carries is what decides whether more shards cost more (docs/scaling.md).
// Process-wide, like raftTraffic; benchmarks read them through the node's
// status and report them per pass.
var passes struct {
	saves            atomic.Uint64 // SaveRaftState calls
	savedShards      atomic.Uint64 // updates in them (one per shard stepped)
	savedEntryShards atomic.Uint64 // of those, updates that carried entries
	savedEntries     atomic.Uint64 // entries saved
	sentShards       atomic.Uint64 // distinct shards in each sent batch, summed
	recvBatches      atomic.Uint64 // message batches received
	recvMessages     atomic.Uint64 // Raft messages in them
	sendFirstYields  atomic.Uint64 // saves that yielded for their Replicate first (sendfirst.go)
}

// holdCounts counts what the transport did with commit-only Replicates
// (commithold.go): held, then dropped because a later message carried
// their commit, released (sent late, when due or ahead of a later message
// that did not carry it), or discarded with a closing connection.
var holdCounts struct{ held, dropped, released, discarded atomic.Uint64 }

// PassCounts is a snapshot of the process's Raft pass counters (every host
// of the process together).
type PassCounts struct {
	Saves            uint64 `json:"saves"`
	SavedShards      uint64 `json:"saved_shards"`
	SavedEntryShards uint64 `json:"saved_entry_shards"`
	SavedEntries     uint64 `json:"saved_entries"`
	SentBatches      uint64 `json:"sent_batches"`
	SentMessages     uint64 `json:"sent_messages"`
	SentShards       uint64 `json:"sent_shards"`
	SentWrites       uint64 `json:"sent_writes"`
	RecvBatches      uint64 `json:"recv_batches"`
	RecvMessages     uint64 `json:"recv_messages"`
	HeldCommits      uint64 `json:"held_commits"`
	DroppedCommits   uint64 `json:"dropped_commits"`
	ReleasedCommits  uint64 `json:"released_commits"`
	DiscardedCommits uint64 `json:"discarded_commits"`
	SendFirstYields  uint64 `json:"send_first_yields"`
}

// Passes reads the process's Raft pass counters.
func Passes() PassCounts {
	return PassCounts{
		Saves:            passes.saves.Load(),
		SavedShards:      passes.savedShards.Load(),
		SavedEntryShards: passes.savedEntryShards.Load(),
		SavedEntries:     passes.savedEntries.Load(),
		SentBatches:      raftTraffic.batches.Load(),
		SentMessages:     raftTraffic.messages.Load(),
		SentShards:       passes.sentShards.Load(),
		SentWrites:       raftTraffic.writes.Load(),
		RecvBatches:      passes.recvBatches.Load(),
		RecvMessages:     passes.recvMessages.Load(),
		HeldCommits:      holdCounts.held.Load(),
		DroppedCommits:   holdCounts.dropped.Load(),
		ReleasedCommits:  holdCounts.released.Load(),
		DiscardedCommits: holdCounts.discarded.Load(),
		SendFirstYields:  passes.sendFirstYields.Load(),
	}
}

// batchShards counts the distinct shards of a batch's messages. dragonboat
// queues a step pass's messages to one peer shard after shard, so counting
// changes of shard is enough (a shard seen twice apart counts twice).
func batchShards(reqs []pb.Message) uint64 {
	var n, last uint64
	for i := range reqs {
		if id := reqs[i].ShardID; i == 0 || id != last {
			n, last = n+1, id
		}
	}
	return n
}

// CountingLogDBFactory wraps a LogDB factory so that its store counts the
// shards each SaveRaftState call carries, and lets a leader's Replicate go
// out before the save of an idle pipeline's entries (sendfirst.go): the
// step worker calls SaveRaftState right after handing its Replicates to
// the send goroutines, so this is the one place to order the two.
type CountingLogDBFactory struct{ config.LogDBFactory }

func (f CountingLogDBFactory) Create(nhc config.NodeHostConfig, cb config.LogDBCallback,
	dirs []string, wals []string) (raftio.ILogDB, error) {
	db, err := f.LogDBFactory.Create(nhc, cb, dirs, wals)
	if err != nil {
		return nil, err
	}
	return countingLogDB{db}, nil
}

type countingLogDB struct{ raftio.ILogDB }

func (c countingLogDB) SaveRaftState(updates []pb.Update, shardID uint64) error {
	var withEntries, entries uint64
	for i := range updates {
		if n := len(updates[i].EntriesToSave); n > 0 {
			withEntries++
			entries += uint64(n)
		}
	}
	passes.saves.Add(1)
	passes.savedShards.Add(uint64(len(updates)))
	passes.savedEntryShards.Add(withEntries)
	passes.savedEntries.Add(entries)
	if withEntries > 0 && sendFirst(updates) {
		passes.sendFirstYields.Add(1)
	}
	return c.ILogDB.SaveRaftState(updates, shardID)
}
