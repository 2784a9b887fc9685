package shard

import (
	"errors"
	"fmt"
	"strconv"
)

// DefaultStepWorkers is how many Raft step workers a new data dir gets
// when none is asked for. Each worker steps its share of the node's shards
// in one pass: one log write and one fdatasync per pass, and one message
// batch per peer (streams.go), for all of them. One worker therefore
// batches every shard of the node together. Session 6 kept 2 because
// nodes that were not CPU-bound lost some pairs at 16 leaders (one sync at
// a time for all shards); session 8, with one send stream per peer, found
// one worker ahead on every count and in every row: 3 nodes of 0.25 cores,
// 1 to 8 leaders, 8 of 8 rows faster (+2 to +33 %), a fifth less CPU per
// operation at 8 leaders, half the fdatasyncs; without quotas at 16 shards
// less CPU per operation in 8 of 8 pairs (median −17 %) and 1.2× the lock
// ops/s in the median; one shard unchanged (docs/bench/round8-session8.md).
// Nodes with cores to spare and syncs that take long can still ask for
// more (--step-workers), so that one shard's sync overlaps another's step.
const DefaultStepWorkers = 1

// stepWorkersPin records, in the data dir, the step-worker count the dir
// was created with: dragonboat refuses to reopen its Raft data with another
// (its "hard settings" hash includes it). A dir written before the count was
// recorded ran with 2.
var stepWorkersPin = pinned{
	file: "step-workers", flag: "--step-workers", legacy: "2", def: strconv.Itoa(DefaultStepWorkers),
	valid: func(v string) error {
		if n, err := strconv.ParseUint(v, 10, 64); err != nil || n == 0 {
			return fmt.Errorf("%q is not a step-worker count", v)
		}
		return nil
	},
	mismatch: ErrStepWorkersMismatch,
}

// ErrStepWorkersMismatch: the data dir was created with another step-worker
// count.
var ErrStepWorkersMismatch = errors.New("shard: the data dir was created with another Raft step-worker count")

// resolveStepWorkers says how many step workers dataDir runs with. want is
// the count asked for (0 = whatever the dir has, DefaultStepWorkers for a
// new dir).
func resolveStepWorkers(dataDir string, want uint64) (uint64, error) {
	w := ""
	if want != 0 {
		w = strconv.FormatUint(want, 10)
	}
	v, err := stepWorkersPin.resolve(dataDir, w)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(v, 10, 64)
}
