package lease

import (
	"sync/atomic"
	"time"
)

// Clock is the only source of time in the shard layer. The state machine
// never reads one; the leader stamps its clock into each command.
type Clock interface {
	Now() time.Time
}

// SystemClock reads the machine clock (monotonic for durations).
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// OffsetClock is a system clock shifted by an adjustable offset: the fault
// suite uses it to show that clock skew does not change outcomes.
type OffsetClock struct{ offset atomic.Int64 }

// Now returns the shifted time.
func (c *OffsetClock) Now() time.Time {
	return time.Now().Add(time.Duration(c.offset.Load()))
}

// Set changes the offset.
func (c *OffsetClock) Set(d time.Duration) { c.offset.Store(int64(d)) }

// ManualClock only moves when told to; for tests.
type ManualClock struct{ now atomic.Int64 }

// NewManualClock starts at t.
func NewManualClock(t time.Time) *ManualClock {
	c := &ManualClock{}
	c.now.Store(t.UnixNano())
	return c
}

// Now returns the current manual time.
func (c *ManualClock) Now() time.Time { return time.Unix(0, c.now.Load()) }

// Advance moves the clock forward.
func (c *ManualClock) Advance(d time.Duration) { c.now.Add(int64(d)) }
