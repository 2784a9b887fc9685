package placement

import (
	"fmt"
	"slices"

	"github.com/vmihailenco/msgpack/v5"
)

// Range changes recorded in the meta group: splits and merges change the
// table at once; a move is a record that walks through its steps as the
// driver (the meta leader's placement loop) completes them, so whichever
// node leads the meta group next resumes it where it stood.

// RangeStep is how far a move has come. Each step names what is done.
type RangeStep uint8

const (
	RangePlanned   RangeStep = 0 // recorded; nothing done on the shards yet
	RangeFrozen    RangeStep = 1 // the source refuses the range (RangeMoving)
	RangeInstalled RangeStep = 2 // the destination holds the range's state and owns it
	RangeSwitched  RangeStep = 3 // the table sends the range to the destination
	// After the source drops the range the record is removed.
)

var rangeStepNames = [...]string{"planned", "frozen", "installed", "switched"}

func (s RangeStep) String() string {
	if int(s) < len(rangeStepNames) {
		return rangeStepNames[s]
	}
	return fmt.Sprintf("step(%d)", uint8(s))
}

// Move is one range move in flight.
type Move struct {
	ID    uint64    `msgpack:"id"`
	Start string    `msgpack:"start"`
	End   string    `msgpack:"end"`
	From  uint64    `msgpack:"from"`
	To    uint64    `msgpack:"to"`
	Step  RangeStep `msgpack:"step"`
	// Abort: roll back (only before RangeInstalled): the destination drops
	// what it got, the source unfreezes.
	Abort  bool   `msgpack:"abort,omitempty"`
	Reason string `msgpack:"reason,omitempty"`
}

// RangeCommand is a "range" meta command.
type RangeCommand struct {
	Op    string    `msgpack:"op"`              // split, merge, move, step, switch, abort, end
	Key   string    `msgpack:"key,omitempty"`   // split: the new range's start; merge/move: a range's start
	Shard uint64    `msgpack:"shard,omitempty"` // move: target shard
	Move  uint64    `msgpack:"move,omitempty"`  // step/switch/abort/end: the move id
	Step  RangeStep `msgpack:"step,omitempty"`  // step: the step now done
	Why   string    `msgpack:"why,omitempty"`   // abort: the reason
}

// EncodeRange encodes a range command for the meta group.
func EncodeRange(c RangeCommand) ([]byte, error) {
	return msgpack.Marshal(&metaCommand{Kind: "range", Range: &c})
}

// RangeResult decodes what a range command's proposal returned: nil when it
// was applied (or was already), else why it was refused.
func RangeResult(r Result) error {
	if r.Value == 1 {
		return nil
	}
	if len(r.Data) == 0 {
		return fmt.Errorf("placement: range command refused")
	}
	return fmt.Errorf("placement: %s", r.Data)
}

var applied = Result{Value: 1}

// MoveOf returns the move in flight with the given id.
func (t *Table) MoveOf(id uint64) (Move, bool) {
	for _, mv := range t.RangeMoves {
		if mv.ID == id {
			return mv, true
		}
	}
	return Move{}, false
}

// Moving reports whether a move in flight involves the shard.
func (t *Table) Moving(shard uint64) bool {
	for _, mv := range t.RangeMoves {
		if mv.From == shard || mv.To == shard {
			return true
		}
	}
	return false
}

// rangeAt returns the index of the range starting at key, or -1.
func (t *Table) rangeAt(key string) int {
	for i, r := range t.Ranges {
		if r.Start == key {
			return i
		}
	}
	return -1
}

// rangeHolding returns the index of the range holding key.
func (t *Table) rangeHolding(key string) int {
	for i, r := range t.Ranges {
		if key >= r.Start && (r.End == "" || key < r.End) {
			return i
		}
	}
	return -1
}

func (t *Table) rangeMoving(i int) bool {
	r := t.Ranges[i]
	for _, mv := range t.RangeMoves {
		if mv.Start == r.Start && mv.End == r.End {
			return true
		}
	}
	return false
}

func (m *Meta) applyRange(c *RangeCommand) Result {
	t := m.table
	if t == nil || c == nil {
		return refused("no table yet")
	}
	switch c.Op {
	case "split":
		return t.split(c.Key)
	case "merge":
		return t.merge(c.Key)
	case "move":
		return t.startMove(c.Key, c.Shard)
	case "step":
		return t.stepRangeMove(c.Move, c.Step)
	case "switch":
		return t.switchMove(c.Move)
	case "abort":
		return t.abortMove(c.Move, c.Why)
	case "end":
		return t.endMove(c.Move)
	}
	return refused("unknown range command %q", c.Op)
}

// split cuts the range holding key so that a new range starts at key. Keys
// are namespace positions, so a split never falls inside a namespace.
func (t *Table) split(key string) Result {
	i := t.rangeHolding(key)
	if i < 0 {
		return refused("no range holds key %x", key)
	}
	r := t.Ranges[i]
	if r.Start == key {
		return refused("a range already starts at %x", key)
	}
	if t.rangeMoving(i) {
		return refused("range [%x, %x) is moving", r.Start, r.End)
	}
	t.Gen++
	lo, hi := r, r
	lo.End, hi.Start = key, key
	lo.Gen, hi.Gen = t.Gen, t.Gen
	t.Ranges = slices.Insert(slices.Delete(t.Ranges, i, i+1), i, lo, hi)
	return applied
}

// merge joins the range starting at key with the next one; both must be on
// the same shard (move one first) and neither moving.
func (t *Table) merge(key string) Result {
	i := t.rangeAt(key)
	if i < 0 || i+1 >= len(t.Ranges) {
		return refused("no range starts at %x with a range after it", key)
	}
	a, b := t.Ranges[i], t.Ranges[i+1]
	if a.Shard != b.Shard {
		return refused("ranges [%x, %x) and [%x, %x) are on shards %d and %d: move one first",
			a.Start, a.End, b.Start, b.End, a.Shard, b.Shard)
	}
	if t.rangeMoving(i) || t.rangeMoving(i+1) {
		return refused("a range to merge is moving")
	}
	t.Gen++
	a.End, a.Gen = b.End, t.Gen
	t.Ranges = slices.Insert(slices.Delete(t.Ranges, i, i+2), i, a)
	return applied
}

// startMove records a move of the range starting at key to shard. One move
// at a time: each one freezes part of the key space, and the driver runs
// them in order.
func (t *Table) startMove(key string, shard uint64) Result {
	i := t.rangeAt(key)
	if i < 0 {
		return refused("no range starts at %x", key)
	}
	r := t.Ranges[i]
	if si, ok := t.Shard(shard); !ok {
		return refused("no shard %d", shard)
	} else if si.State != ShardActive {
		return refused("shard %d is %v: ranges move only to active shards", shard, si.State)
	}
	if r.Shard == shard {
		return refused("range [%x, %x) is already on shard %d", r.Start, r.End, shard)
	}
	if len(t.RangeMoves) > 0 {
		return refused("move %d is in flight: one move at a time", t.RangeMoves[0].ID)
	}
	t.NextMove++
	t.RangeMoves = append(t.RangeMoves, Move{ID: t.NextMove, Start: r.Start, End: r.End, From: r.Shard, To: shard})
	return Result{Value: 1, Data: fmt.Appendf(nil, "%d", t.NextMove)}
}

func (t *Table) moveIndex(id uint64) int {
	for i, mv := range t.RangeMoves {
		if mv.ID == id {
			return i
		}
	}
	return -1
}

// stepRangeMove records that step is done. Repeats are applied (no-op); skipping
// a step is refused.
func (t *Table) stepRangeMove(id uint64, step RangeStep) Result {
	i := t.moveIndex(id)
	if i < 0 {
		return refused("no move %d", id)
	}
	mv := &t.RangeMoves[i]
	switch {
	case mv.Step >= step:
		return applied
	case step != mv.Step+1 || step > RangeInstalled:
		return refused("move %d is %v; cannot record %v", id, mv.Step, step)
	case mv.Abort:
		return refused("move %d is rolling back", id)
	}
	mv.Step = step
	return applied
}

// switchMove points the range at the destination under a new generation.
func (t *Table) switchMove(id uint64) Result {
	i := t.moveIndex(id)
	if i < 0 {
		return refused("no move %d", id)
	}
	mv := &t.RangeMoves[i]
	if mv.Step == RangeSwitched {
		return applied
	}
	if mv.Step != RangeInstalled {
		return refused("move %d is %v, not installed", id, mv.Step)
	}
	j := t.rangeAt(mv.Start)
	if j < 0 || t.Ranges[j].End != mv.End {
		return refused("the range of move %d is gone from the table", id)
	}
	t.Gen++
	t.Ranges[j].Shard, t.Ranges[j].Gen = mv.To, t.Gen
	mv.Step = RangeSwitched
	return applied
}

// abortMove turns a move around; once installed it can only go forward.
func (t *Table) abortMove(id uint64, why string) Result {
	i := t.moveIndex(id)
	if i < 0 {
		return refused("no move %d", id)
	}
	mv := &t.RangeMoves[i]
	if mv.Step >= RangeInstalled {
		return refused("move %d is %v: it can only finish", id, mv.Step)
	}
	mv.Abort, mv.Reason = true, why
	return applied
}

// endMove removes a finished (switched and dropped) or rolled-back move.
func (t *Table) endMove(id uint64) Result {
	i := t.moveIndex(id)
	if i < 0 {
		return applied // already ended
	}
	if mv := t.RangeMoves[i]; mv.Step != RangeSwitched && !mv.Abort {
		return refused("move %d is %v", id, mv.Step)
	}
	t.RangeMoves = slices.Delete(t.RangeMoves, i, i+1)
	return applied
}
