package shard

import (
	"errors"
	"fmt"
	"strconv"
)

// DefaultStepWorkers is how many Raft step workers a new data dir gets
// when none is asked for. Each worker steps its share of the node's shards
// in one pass: one log write and one fdatasync per pass, and one message
// batch per peer, for all of them. One worker therefore batches every shard
// of the node together, and on nodes whose CPU budget is a fraction of a
// core that pays: session 6 (docs/scaling.md), 8 shard leaders on 5 and on
// 3 nodes of 0.25 cores, alternating pairs, +18 % and +19 % ops/s at 14–16 %
// less server CPU per operation, a quarter fewer fdatasyncs. But a node
// that is not CPU-bound then waits for one sync at a time for all its
// shards: 16 leaders on 3 nodes without quotas lost throughput in 4 of 7
// pairs (p99 up to 0.9 s) on a machine too loaded to settle it. So the
// default stays 2, and small nodes are told to ask for 1
// (docs/operations.md).
const DefaultStepWorkers = 2

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
