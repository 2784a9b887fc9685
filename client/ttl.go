package client

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"
)

// TTLError is returned, before anything is sent, for a lease TTL the
// cluster would refuse: outside the bounds its handshake answer named
// (1 s..600 s unless the cluster is configured otherwise), or not positive.
// It matches ErrInvalidArgument.
type TTLError struct {
	TTL      time.Duration
	Min, Max time.Duration // the cluster's bounds; zero when it did not say
}

func (e *TTLError) Error() string {
	if e.Max == 0 {
		return fmt.Sprintf("client: lease TTL %v: must be positive (whole milliseconds)", e.TTL)
	}
	return fmt.Sprintf("client: lease TTL %v is outside the cluster's bounds [%v, %v]", e.TTL, e.Min, e.Max)
}

// Is makes errors.Is(err, ErrInvalidArgument) true.
func (e *TTLError) Is(target error) bool { return target == ErrInvalidArgument }

// ttlLimits are the bounds the endpoints' handshake answers named, in
// milliseconds (0: not named yet).
type ttlLimits struct{ min, max atomic.Int64 }

// learn takes the bounds from a handshake answer's JSON description.
func (l *ttlLimits) learn(info []byte) {
	var v struct {
		Min int64 `json:"min_ttl_ms"`
		Max int64 `json:"max_ttl_ms"`
	}
	if json.Unmarshal(info, &v) == nil && v.Min > 0 && v.Max >= v.Min {
		l.min.Store(v.Min)
		l.max.Store(v.Max)
	}
}

// check returns a *TTLError when ttl is one the cluster would refuse.
func (l *ttlLimits) check(ttl time.Duration) error {
	ms := ttl.Milliseconds()
	if ms <= 0 {
		return &TTLError{TTL: ttl}
	}
	min, max := l.min.Load(), l.max.Load()
	if max > 0 && (ms < min || ms > max) {
		return &TTLError{TTL: ttl, Min: time.Duration(min) * time.Millisecond, Max: time.Duration(max) * time.Millisecond}
	}
	return nil
}
