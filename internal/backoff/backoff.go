// Package backoff computes the delays between retries: capped exponential
// growth with full jitter. The client, the router and the shard leader's
// retry loops all wait through it.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Policy says how long retry number n (0 for the first retry) waits: a
// uniformly random duration in (0, min(Max, Base·2^n)]. Full jitter
// spreads the retries of many callers that failed together (every client
// of a shard whose leader just died), so they do not come back in
// lockstep. A Policy is a value, safe for concurrent use.
type Policy struct {
	Base time.Duration // the ceiling of the first retry's delay (> 0)
	Max  time.Duration // the ceiling grows no further than this (≥ Base)

	// Rand returns a uniform value in [0, n) (nil: math/rand/v2's
	// Int64N); After makes the timer Wait waits on (nil: time.After).
	// Tests set them to make delays known and time move at their pace.
	Rand  func(n int64) int64
	After func(d time.Duration) <-chan time.Time
}

// Ceiling is the longest delay of retry number attempt: Base·2^attempt,
// capped at Max.
func (p Policy) Ceiling(attempt int) time.Duration {
	attempt = max(attempt, 0)
	if p.Base > p.Max>>attempt {
		return p.Max
	}
	return p.Base << attempt
}

// Delay draws the delay before retry number attempt: in (0, Ceiling].
// A policy without a positive ceiling gives 0.
func (p Policy) Delay(attempt int) time.Duration {
	c := p.Ceiling(attempt)
	if c <= 0 {
		return 0
	}
	draw := rand.Int64N
	if p.Rand != nil {
		draw = p.Rand
	}
	return time.Duration(draw(int64(c))) + 1
}

// Wait sleeps for Delay(attempt), or until ctx is done, whichever comes
// first, and returns ctx's error in the second case.
func (p Policy) Wait(ctx context.Context, attempt int) error {
	after := time.After
	if p.After != nil {
		after = p.After
	}
	select {
	case <-after(p.Delay(attempt)):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
