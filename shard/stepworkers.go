package shard

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/wardenlock/warden/internal/atomicfile"
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

// legacyStepWorkers is what a data dir created before the count was
// recorded ran with.
const legacyStepWorkers = 2

// stepWorkersFile records, in the data dir, the step-worker count the dir
// was created with: dragonboat refuses to reopen its Raft data with another
// (its "hard settings" hash includes it).
const stepWorkersFile = "step-workers"

// ErrStepWorkersMismatch: the data dir was created with another step-worker
// count.
var ErrStepWorkersMismatch = errors.New("shard: the data dir was created with another Raft step-worker count")

// resolveStepWorkers says how many step workers dataDir runs with. want is
// the count asked for (0 = whatever the dir has, DefaultStepWorkers for a
// new dir). A dir written before the count was recorded ran with 2.
func resolveStepWorkers(dataDir string, want uint64) (uint64, error) {
	var have uint64
	path := filepath.Join(dataDir, stepWorkersFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		have, err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || have == 0 {
			return 0, fmt.Errorf("shard: %s holds %q, not a step-worker count", path, strings.TrimSpace(string(b)))
		}
	case errors.Is(err, os.ErrNotExist):
		if des, _ := os.ReadDir(filepath.Join(dataDir, "raft")); len(des) > 0 {
			have = legacyStepWorkers
		}
	default:
		return 0, err
	}
	if have != 0 {
		if want != 0 && want != have {
			return 0, fmt.Errorf("%w: %s runs %d, --step-workers asks for %d (start with --step-workers %d, or use a new data dir)",
				ErrStepWorkersMismatch, dataDir, have, want, have)
		}
		return have, nil
	}
	if want == 0 {
		want = DefaultStepWorkers
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return 0, err
	}
	if err := atomicfile.Write(path, []byte(strconv.FormatUint(want, 10)+"\n"), 0o644); err != nil {
		return 0, err
	}
	return want, nil
}
