package client

import "testing"

// AckSeq is the smallest unfinished Seq (the next one to hand out when none
// is open), whatever order requests finish in.
func TestSeqTrackerAck(t *testing.T) {
	tests := []struct {
		name  string
		begin int      // Seqs 1..begin are handed out
		end   []uint64 // then finished in this order
		want  uint64
	}{
		{"nothing handed out", 0, nil, 1},
		{"all open", 3, nil, 1},
		{"oldest finished", 3, []uint64{1}, 2},
		{"a newer one finished first", 3, []uint64{2}, 1},
		{"out of order, then the oldest", 4, []uint64{3, 2, 1}, 4},
		{"all finished", 3, []uint64{2, 3, 1}, 4},
		{"an unknown Seq is ignored", 2, []uint64{9, 1}, 2},
		{"finished twice", 3, []uint64{1, 1, 2}, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := newSeqTracker()
			for i := 1; i <= tc.begin; i++ {
				if s := tr.begin(); s != uint64(i) {
					t.Fatalf("begin %d = %d", i, s)
				}
			}
			for _, s := range tc.end {
				tr.end(s)
			}
			if got := tr.ack(); got != tc.want {
				t.Fatalf("ack = %d, want %d", got, tc.want)
			}
		})
	}
}
