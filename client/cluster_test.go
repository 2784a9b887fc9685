package client_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/node/nodetest"
)

// TestSessionKeysAndTTLBoundsOnACluster runs against a real cluster: keys
// put with WithLease on a fresh session land on shards the session has never
// used (the put carries the session's TTL and lease key) and go when the
// session ends; a TTL outside the bounds the nodes name at the handshake is
// refused by NewSession with a TTLError naming them.
func TestSessionKeysAndTTLBoundsOnACluster(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Shards: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := client.New(ctx, c.Endpoints())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	s, err := cl.NewSession(ctx, client.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i := range 8 { // eight namespaces over four shards
		key := fmt.Sprintf("/services/api%d/n1", i)
		if _, err := cl.Put(ctx, key, []byte("10.0.0.7:8080"), client.WithLease(s)); err != nil {
			t.Fatalf("Put(%s, WithLease) on a fresh session: %v", key, err)
		}
		kv, err := cl.Get(ctx, key)
		if err != nil || kv.Lease != s.Lease() {
			t.Fatalf("Get(%s) = %+v, %v; want the session's lease %x", key, kv, err, s.Lease())
		}
		keys = append(keys, key)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, key := range keys {
		if _, err := cl.Get(ctx, key); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("Get(%s) after the session closed: %v, want ErrNotFound", key, err)
		}
	}

	_, err = cl.NewSession(ctx, client.WithTTL(10*time.Hour))
	var te *client.TTLError
	if !errors.As(err, &te) || te.Min != time.Second || te.Max != 10*time.Minute {
		t.Fatalf("NewSession(WithTTL(10h)) = %v, want a TTLError naming [1s, 10m0s]", err)
	}
}
