package client

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff computes retry delays with full jitter: attempt n waits a uniformly
// random duration in [0, min(Max, Base*2^n)). Full jitter spreads the retries
// of many clients that failed together, so they do not return in lockstep.
// The zero value uses Base 10 ms and Max 2 s: the first retries after a
// failover come quickly (an election takes 150–300 ms), later ones back off.
type Backoff struct {
	Base time.Duration
	Max  time.Duration
}

const (
	defaultBackoffBase = 10 * time.Millisecond
	defaultBackoffMax  = 2 * time.Second
)

// Delay returns the delay before retry number attempt (0 for the first retry).
func (b Backoff) Delay(attempt int) time.Duration {
	base, limit := b.Base, b.Max
	if base <= 0 {
		base = defaultBackoffBase
	}
	if limit <= 0 {
		limit = defaultBackoffMax
	}
	ceil := limit
	if attempt < 32 && base<<attempt > 0 && base<<attempt < limit {
		ceil = base << attempt
	}
	return rand.N(ceil) + 1
}

// Wait sleeps for Delay(attempt) or until ctx is done, whichever comes first,
// and returns ctx's error in the second case.
func (b Backoff) Wait(ctx context.Context, attempt int) error {
	t := time.NewTimer(b.Delay(attempt))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
