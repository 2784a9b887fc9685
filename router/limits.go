package router

import (
	"encoding/json"
	"sync/atomic"
	"time"
)

// The handshake answer tells a client the lease TTL bounds the shards
// enforce ("min_ttl_ms", "max_ttl_ms" in Hello's JSON Value), so a client
// can refuse an out-of-range TTL before its first lock fails with it. A
// node knows them from its state machine config (Config.MinTTL/MaxTTL); a
// standalone router learns them from the first node that answers its
// forwarding handshake, and leaves them out until then.

// ttlBounds holds the bounds in milliseconds; zero: not known.
type ttlBounds struct{ min, max atomic.Int64 }

func (b *ttlBounds) set(min, max int64) {
	if min > 0 && max >= min && b.max.Load() == 0 {
		b.min.Store(min)
		b.max.Store(max)
	}
}

// addTo adds the bounds to a handshake answer's JSON description.
func (b *ttlBounds) addTo(info map[string]any) {
	if max := b.max.Load(); max > 0 {
		info["min_ttl_ms"], info["max_ttl_ms"] = b.min.Load(), max
	}
}

// learn takes the bounds from a node's handshake answer.
func (b *ttlBounds) learn(value []byte) {
	var info struct {
		Min int64 `json:"min_ttl_ms"`
		Max int64 `json:"max_ttl_ms"`
	}
	if json.Unmarshal(value, &info) == nil {
		b.set(info.Min, info.Max)
	}
}

func (b *ttlBounds) configure(min, max time.Duration) {
	b.set(min.Milliseconds(), max.Milliseconds())
}
