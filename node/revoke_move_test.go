package node_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/node"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/wire"
)

// TestRevokeDuringRangeMove revokes a session while the range holding its
// lock is frozen for a move: the source refuses (the range's state is on
// its way), and the destination, asked before the range arrived, has
// nothing to revoke. The revocation must still end the lock: after the
// move, the lock is free on the destination.
func TestRevokeDuringRangeMove(t *testing.T) {
	var once sync.Once
	reached, release := make(chan struct{}), make(chan struct{})
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 2, Edit: func(cfg *node.Config) {
		cfg.MoveHook = func(_ uint64, step placement.RangeStep, stop <-chan struct{}) {
			if step != placement.RangeFrozen {
				return
			}
			hit := false
			once.Do(func() { hit = true })
			if !hit {
				return
			}
			close(reached)
			select {
			case <-release:
			case <-stop:
			}
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	admin := newClient(t, c)
	holder := newClient(t, c)
	s1, err := holder.NewSession(ctx, client.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	const path = "/rv/ns/job"
	m1 := client.NewMutex(s1, path)
	if err := m1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	ns := wire.Namespace(path, 2)
	if err := admin.SplitRange(ctx, ns); err != nil && !errors.Is(err, wire.ErrInvalidArgument) {
		t.Fatal(err)
	}
	key := wire.RouteKey(ns)
	to := otherShard(waitRange(t, admin, key), key)
	if _, err := admin.MoveRange(ctx, key, to); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reached:
	case <-ctx.Done():
		t.Fatal("the move never froze the range")
	}
	revoked := make(chan *wire.Response, 1)
	go func() {
		resp, _ := admin.Do(ctx, &wire.Request{Op: wire.OpRevoke, Lease: s1.Lease()})
		revoked <- resp
	}()
	time.Sleep(500 * time.Millisecond) // the destination answers before the range arrives
	close(release)
	select {
	case resp := <-revoked:
		if resp == nil || resp.Code != wire.OK {
			t.Fatalf("revoke: %+v", resp)
		}
	case <-ctx.Done():
		t.Fatal("the revocation never answered")
	}
	waitOn(t, admin, key, to)
	info, err := admin.LockInfo(ctx, path)
	if err == nil && len(info.Holders) > 0 {
		t.Fatalf("the revoked session still holds %s after the move: %+v", path, info.Holders)
	}
	if err != nil && !errors.Is(err, client.ErrNotFound) {
		t.Fatal(err)
	}
}
