package backoff

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

func TestCeilingDoublesUpToMax(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name    string
		p       Policy
		attempt int
		want    time.Duration
	}{
		{"first retry", Policy{Base: 10 * ms, Max: 80 * ms}, 0, 10 * ms},
		{"negative attempt is the first", Policy{Base: 10 * ms, Max: 80 * ms}, -3, 10 * ms},
		{"doubles", Policy{Base: 10 * ms, Max: 80 * ms}, 2, 40 * ms},
		{"reaches max", Policy{Base: 10 * ms, Max: 80 * ms}, 3, 80 * ms},
		{"capped", Policy{Base: 10 * ms, Max: 80 * ms}, 4, 80 * ms},
		{"capped between doublings", Policy{Base: 10 * ms, Max: 50 * ms}, 3, 50 * ms},
		{"no overflow at 2^62", Policy{Base: 1, Max: math.MaxInt64}, 62, 1 << 62},
		{"no overflow past it", Policy{Base: 1, Max: math.MaxInt64}, 63, math.MaxInt64},
		{"huge attempt", Policy{Base: 10 * ms, Max: 2 * time.Second}, 1 << 30, 2 * time.Second},
		{"max below base", Policy{Base: 10 * ms, Max: 5 * ms}, 0, 5 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.Ceiling(tc.attempt); got != tc.want {
				t.Fatalf("Ceiling(%d) = %s, want %s", tc.attempt, got, tc.want)
			}
		})
	}
}

// The draw covers all of (0, Ceiling]: its two ends come from the least and
// the greatest value the randomness can give.
func TestDelayIsFullJitter(t *testing.T) {
	p := Policy{Base: 10 * time.Millisecond, Max: 80 * time.Millisecond}
	low, high := p, p
	low.Rand = func(int64) int64 { return 0 }
	high.Rand = func(n int64) int64 { return n - 1 }
	for attempt := range 10 {
		if d := low.Delay(attempt); d != 1 {
			t.Errorf("Delay(%d) with the least draw = %s, want 1ns", attempt, d)
		}
		if d, c := high.Delay(attempt), p.Ceiling(attempt); d != c {
			t.Errorf("Delay(%d) with the greatest draw = %s, want the ceiling %s", attempt, d, c)
		}
	}
}

// With the real randomness every delay is in (0, Ceiling], and draws fall
// in both halves (1000 draws all in one half: chance 2^-999).
func TestDelayBoundsWithRealRandomness(t *testing.T) {
	p := Policy{Base: 5 * time.Millisecond, Max: 320 * time.Millisecond}
	for attempt := range 40 {
		c := p.Ceiling(attempt)
		var below, above int
		for range 1000 {
			d := p.Delay(attempt)
			if d <= 0 || d > c {
				t.Fatalf("Delay(%d) = %s, want in (0, %s]", attempt, d, c)
			}
			if d <= c/2 {
				below++
			} else {
				above++
			}
		}
		if below == 0 || above == 0 {
			t.Fatalf("attempt %d: %d draws below half the ceiling, %d above", attempt, below, above)
		}
	}
}

func TestZeroPolicyDoesNotWait(t *testing.T) {
	if d := (Policy{}).Delay(3); d != 0 {
		t.Fatalf("zero policy: Delay = %s", d)
	}
}

// Wait waits on a timer of Delay(attempt), and gives up when the context
// ends first.
func TestWait(t *testing.T) {
	fire := make(chan time.Time)
	var asked []time.Duration
	p := Policy{Base: 10 * time.Millisecond, Max: time.Second,
		Rand:  func(n int64) int64 { return n - 1 },
		After: func(d time.Duration) <-chan time.Time { asked = append(asked, d); return fire }}

	done := make(chan error)
	go func() { done <- p.Wait(context.Background(), 2) }()
	fire <- time.Time{}
	if err := <-done; err != nil {
		t.Fatalf("Wait = %v after its timer fired", err)
	}
	if len(asked) != 1 || asked[0] != 40*time.Millisecond {
		t.Fatalf("timers asked for: %v, want [40ms]", asked)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Wait(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on a cancelled context = %v, want context.Canceled", err)
	}
}
