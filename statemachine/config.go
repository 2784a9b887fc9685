package statemachine

import (
	"errors"
	"fmt"

	"github.com/wardenlock/warden/hierarchy"
)

// DefaultConfig returns the limits documented on Config.
func DefaultConfig() Config {
	return Config{
		Paths:        hierarchy.DefaultLimits,
		MinTTL:       1000,
		MaxTTL:       600_000,
		MaxValue:     4096,
		SplitDepth:   2,
		MaxWaiters:   10_000,
		MaxLeaseLock: 100_000,
		ClientIdleMs: 10 * 60 * 1000,
		TombstoneMs:  60 * 60 * 1000,

		MaxOwnerLeases:  10_000,
		MaxOwnerLocks:   100_000,
		MaxOwnerWaiters: 10_000,
	}
}

// Validate reports the first field that is out of range. Zero fields are
// valid: New replaces them with their defaults.
func (c Config) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf("statemachine: "+format, args...))
		}
	}
	check(c.Paths.MaxPathBytes >= 0 && c.Paths.MaxDepth >= 0, "path limits must not be negative")
	check(c.MinTTL >= 0 && c.MaxTTL >= 0, "TTLs must not be negative")
	d := c.withDefaults()
	check(d.MinTTL <= d.MaxTTL, "MinTTL %d is above MaxTTL %d", d.MinTTL, d.MaxTTL)
	check(c.MaxTTL <= maxSingleTTL, "MaxTTL %d is above %d", c.MaxTTL, int64(maxSingleTTL))
	check(c.MaxValue >= 0, "MaxValue must not be negative")
	check(c.SplitDepth >= 0, "SplitDepth must not be negative")
	check(c.MaxWaiters >= 0 && c.MaxLeaseLock >= 0, "limits must not be negative")
	check(c.MaxOwnerLeases >= 0 && c.MaxOwnerLocks >= 0 && c.MaxOwnerWaiters >= 0, "quotas must not be negative")
	check(c.ClientIdleMs >= 0 && c.TombstoneMs >= 0, "retention times must not be negative")
	check(c.LockDelay >= 0 && c.LockDelay <= d.MaxTTL, "LockDelay %d is outside 0..MaxTTL", c.LockDelay)
	return errors.Join(errs...)
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c Config) WithDefaults() Config { return c.withDefaults() }

// withDefaults fills zero (or negative) fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Paths.MaxPathBytes <= 0 {
		c.Paths.MaxPathBytes = d.Paths.MaxPathBytes
	}
	if c.Paths.MaxDepth <= 0 {
		c.Paths.MaxDepth = d.Paths.MaxDepth
	}
	fill64 := func(v *int64, def int64) {
		if *v <= 0 {
			*v = def
		}
	}
	fill := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	fill64(&c.MinTTL, d.MinTTL)
	fill64(&c.MaxTTL, d.MaxTTL)
	c.MaxTTL = min(c.MaxTTL, maxSingleTTL) // a single-lock lease keeps its TTL in 48 bits
	fill64(&c.ClientIdleMs, d.ClientIdleMs)
	fill64(&c.TombstoneMs, d.TombstoneMs)
	fill(&c.MaxValue, d.MaxValue)
	fill(&c.SplitDepth, d.SplitDepth)
	fill(&c.MaxWaiters, d.MaxWaiters)
	fill(&c.MaxLeaseLock, d.MaxLeaseLock)
	fill(&c.MaxOwnerLeases, d.MaxOwnerLeases)
	fill(&c.MaxOwnerLocks, d.MaxOwnerLocks)
	fill(&c.MaxOwnerWaiters, d.MaxOwnerWaiters)
	return c
}
