package main

import (
	"fmt"

	"github.com/wardenlock/warden/raftnode"
)

// addPasses returns a + sign·b, field by field.
func addPasses(a, b raftnode.PassCounts, sign int) raftnode.PassCounts {
	f := func(x, y uint64) uint64 {
		if sign < 0 {
			return x - y
		}
		return x + y
	}
	return raftnode.PassCounts{
		Saves: f(a.Saves, b.Saves), SavedShards: f(a.SavedShards, b.SavedShards),
		SavedEntryShards: f(a.SavedEntryShards, b.SavedEntryShards), SavedEntries: f(a.SavedEntries, b.SavedEntries),
		SentBatches: f(a.SentBatches, b.SentBatches), SentMessages: f(a.SentMessages, b.SentMessages),
		SentShards: f(a.SentShards, b.SentShards), SentWrites: f(a.SentWrites, b.SentWrites),
		RecvBatches: f(a.RecvBatches, b.RecvBatches), RecvMessages: f(a.RecvMessages, b.RecvMessages),
		HeldCommits: f(a.HeldCommits, b.HeldCommits), DroppedCommits: f(a.DroppedCommits, b.DroppedCommits),
		ReleasedCommits: f(a.ReleasedCommits, b.ReleasedCommits), DiscardedCommits: f(a.DiscardedCommits, b.DiscardedCommits),
	}
}

// passLine describes how much one Raft pass carried over a row: shards per
// SaveRaftState call, messages and shards per transport batch, batches per
// transport write, and the calls per operation.
func passLine(r row) string {
	p := r.passes
	if p.Saves == 0 || r.ops == 0 {
		return ""
	}
	div := func(a, b uint64) float64 { return float64(a) / float64(max(b, 1)) }
	op := func(a uint64) float64 { return float64(a) / float64(r.ops) }
	line := fmt.Sprintf("Raft passes, %d nodes, %d leaders (every node): per SaveRaftState %.2f shards (%.2f with entries, %.2f entries); "+
		"per sent batch %.2f messages, %.2f shards; %.2f batches per transport write; per received batch %.2f messages; "+
		"per operation: %.4f saves, %.4f sent batches, %.4f transport writes, %.4f received batches",
		r.nodes, r.leaders, div(p.SavedShards, p.Saves), div(p.SavedEntryShards, p.Saves), div(p.SavedEntries, p.Saves),
		div(p.SentMessages, p.SentBatches), div(p.SentShards, p.SentBatches), div(p.SentBatches, p.SentWrites), div(p.RecvMessages, p.RecvBatches),
		op(p.Saves), op(p.SentBatches), op(p.SentWrites), op(p.RecvBatches))
	if p.HeldCommits > 0 { // a node that holds commit-only Replicates (raftnode/commithold.go)
		line += fmt.Sprintf("; commit-only Replicates per operation: %.4f held, %.4f dropped, %.4f released late",
			op(p.HeldCommits), op(p.DroppedCommits), op(p.ReleasedCommits))
	}
	return line
}
