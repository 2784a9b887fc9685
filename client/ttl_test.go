package client

import (
	"errors"
	"testing"
	"time"

	"github.com/wardenlock/warden/wire"
)

// TestSessionTTLOutsideTheClusterBounds: a TTL outside the bounds the
// handshake named, or a negative one, is refused by NewSession and Acquire
// before anything is sent, with a TTLError naming the bounds.
func TestSessionTTLOutsideTheClusterBounds(t *testing.T) {
	srv := newFakeServer(t, okHandler)
	srv.hello = func(req *wire.Request) *wire.Response {
		return &wire.Response{ID: req.ID, Value: []byte(`{"protocol":1,"node":1,"min_ttl_ms":1000,"max_ttl_ms":600000}`)}
	}
	c := newTestClient(t, []string{srv.addr()})
	ctx := testContext(t)
	for _, ttl := range []time.Duration{10 * time.Hour, 500 * time.Millisecond, -time.Second} {
		s, err := c.NewSession(ctx, WithTTL(ttl))
		var te *TTLError
		if !errors.Is(err, ErrInvalidArgument) || !errors.As(err, &te) || te.TTL != ttl {
			t.Fatalf("NewSession(WithTTL(%v)) = %v, %v; want a TTLError", ttl, s, err)
		}
		if ttl > 0 && (te.Min != time.Second || te.Max != 10*time.Minute) {
			t.Fatalf("TTLError names the bounds [%v, %v], want [1s, 10m0s]: %v", te.Min, te.Max, err)
		}
		if _, err := c.Acquire(ctx, "/locks/a", ttl); !errors.As(err, &te) {
			t.Fatalf("Acquire with TTL %v = %v, want a TTLError", ttl, err)
		}
	}
	if n := len(srv.requests(wire.OpKeepAlive)) + len(srv.requests(wire.OpAcquire)); n != 0 {
		t.Fatalf("%d requests sent with a refused TTL", n)
	}
	if s, err := c.NewSession(ctx, WithTTL(time.Minute)); err != nil {
		t.Fatalf("a TTL within the bounds: %v", err)
	} else {
		s.Close(ctx)
	}
}
