package router

import (
	"encoding/json"
	"testing"
	"time"
)

// TestHandshakeNamesTTLBounds: a router configured with the shards' TTL
// bounds names them in its handshake answer; one without names none until
// it learns them from a node's answer (a standalone router's forwarding
// handshake), and keeps the first it learns.
func TestHandshakeNamesTTLBounds(t *testing.T) {
	answer := func(b *ttlBounds) map[string]any {
		info := map[string]any{}
		b.addTo(info)
		raw, _ := json.Marshal(info)
		var out map[string]any
		json.Unmarshal(raw, &out)
		return out
	}
	var node ttlBounds
	node.configure(time.Second, 10*time.Minute)
	got := answer(&node)
	if got["min_ttl_ms"] != 1000.0 || got["max_ttl_ms"] != 600000.0 {
		t.Fatalf("a node's handshake names %v", got)
	}
	var standalone ttlBounds
	if got := answer(&standalone); len(got) != 0 {
		t.Fatalf("a router that knows no bounds names %v", got)
	}
	nodeHello, _ := json.Marshal(map[string]any{"protocol": 1, "node": 2, "min_ttl_ms": 1000, "max_ttl_ms": 600000})
	standalone.learn(nodeHello)
	standalone.learn([]byte(`{"min_ttl_ms":5,"max_ttl_ms":6}`))
	if got := answer(&standalone); got["min_ttl_ms"] != 1000.0 || got["max_ttl_ms"] != 600000.0 {
		t.Fatalf("after learning from a node: %v", got)
	}
}
