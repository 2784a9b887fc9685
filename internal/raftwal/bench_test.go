package raftwal

import (
	"testing"

	pb "github.com/lni/dragonboat/v4/raftpb"
)

// BenchmarkSaveRaftState: one call with one 2 KB entry for each of 4
// replicas (a step worker's round), without fdatasync: the store's own CPU.
func BenchmarkSaveRaftState(b *testing.B) {
	w, err := Open(b.TempDir(), Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	cmd := make([]byte, 2048)
	ups := make([]pb.Update, 4)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		idx := uint64(i + 1)
		for s := range ups {
			ups[s] = pb.Update{ShardID: uint64(s + 1), ReplicaID: 1,
				State:         pb.State{Term: 1, Commit: idx - 1},
				EntriesToSave: []pb.Entry{{Index: idx, Term: 1, Cmd: cmd}}}
		}
		if err := w.SaveRaftState(ups, 1); err != nil {
			b.Fatal(err)
		}
	}
}
