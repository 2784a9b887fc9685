package node_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/router"
	"github.com/wardenlock/warden/wire"
)

// startStandaloneRouter serves a router with no replicas in front of c,
// learning the table from its nodes; it returns the router's address.
func startStandaloneRouter(t *testing.T, c *nodetest.Cluster) string {
	t.Helper()
	srv := router.New(router.Config{Seeds: c.AllEndpoints()})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// TestStandaloneRouter puts a replica-less router in front of the cluster:
// it learns the table from seed nodes and forwards every request to the
// shard leaders, including blocking acquires, keepalives and watches.
func TestStandaloneRouter(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Shards: 4})
	addr := startStandaloneRouter(t, c)

	ctx := ctxT(t, 60*time.Second)
	cl, err := client.New(ctx, []string{addr}, client.WithRequestTimeout(15*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	a := session(t, cl, 3*time.Second)
	b := session(t, cl, 10*time.Second)

	m := client.NewMutex(a, "/routed/ns/lock")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := client.NewMutex(b, "/routed/ns/lock/child").TryLock(ctx); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("through the router: %v, want conflict", err)
	}
	events := cl.Watch(ctx, "/routed/ns", client.WithPrefix())
	waiter := client.NewMutex(b, "/routed/ns/lock")
	granted := make(chan error, 1)
	go func() { granted <- waiter.Lock(ctx) }()
	time.Sleep(4 * time.Second) // longer than a's TTL: only forwarded keepalives keep it
	if !m.IsHeld() {
		t.Fatal("session lost: keepalives through the standalone router did not reach the shard leaders")
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-granted; err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case wr := <-events:
			for _, ev := range wr.Events {
				if ev.Kind == wire.EvAcquired && ev.Cause == wire.CauseHandOff && ev.Token == waiter.Token() {
					return
				}
			}
		case <-deadline:
			t.Fatal("hand-off event never arrived through the router's watch")
		}
	}
}
