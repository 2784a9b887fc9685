package node_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/wardenlock/warden/auth"
	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/node"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/wire"
)

// TestLeaseSquatOnFreshShardRefused: with auth on, alice's session holds a
// lock on one shard; erin (same permissions) reads the lease id from the
// lock's holders and tries to open the lease first on another shard, which
// alice has not touched. Without the lease's key (which only alice's client
// has) that is Unauthorized and leaves nothing behind; alice then locks on
// that shard under the same session, through the Go client.
func TestLeaseSquatOnFreshShardRefused(t *testing.T) {
	c, addr := authCluster(t)
	ctx := ctxT(t, 60*time.Second)
	here, there := pathsOnTwoShards(t, c)

	cl, err := client.New(ctx, []string{addr}, client.WithCredentials("alice-token"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	s, err := cl.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.NewMutex(s, here).Lock(ctx); err != nil {
		t.Fatalf("alice locks %s: %v", here, err)
	}

	erin, _ := nodetest.DialWire(t, addr, nil, "erin-token", 0)
	info := erin.Do(&wire.Request{Op: wire.OpLockInfo, Path: here})
	if len(info.Holders) != 1 || info.Holders[0].Lease != s.Lease() {
		t.Fatalf("erin reads the holder's lease: %v %+v", info.Code, info.Holders)
	}
	lease := info.Holders[0].Lease
	for _, tc := range []struct {
		name string
		req  *wire.Request
	}{
		{"acquire", &wire.Request{Op: wire.OpAcquire, Path: there, Lease: lease, TTL: 30000}},
		{"acquire with a guessed key", &wire.Request{Op: wire.OpAcquire, Path: there, Lease: lease, LeaseKey: lease, TTL: 30000}},
		{"wait", &wire.Request{Op: wire.OpAcquire, Path: there, Lease: lease, TTL: 30000, Wait: 1000}},
		{"campaign", &wire.Request{Op: wire.OpCampaign, Path: there, Lease: lease, TTL: 30000}},
		{"open it as a session", &wire.Request{Op: wire.OpSession, Path: there, Lease: lease, TTL: 30000}},
	} {
		if r := erin.Do(tc.req); r.Code != wire.Unauthorized || r.Msg == "" {
			t.Fatalf("erin's %s under alice's lease on the fresh shard: %v %q, want Unauthorized", tc.name, r.Code, r.Msg)
		}
	}
	if r := erin.Do(&wire.Request{Op: wire.OpLockInfo, Path: there}); r.Code != wire.NotFound {
		t.Fatalf("the refused squat left %v %+v on %s", r.Code, r.Holders, there)
	}

	if err := client.NewMutex(s, there).Lock(ctx); err != nil {
		t.Fatalf("alice locks %s on the shard erin tried first: %v", there, err)
	}
	if r := erin.Do(&wire.Request{Op: wire.OpLockInfo, Path: there}); len(r.Holders) != 1 || r.Holders[0].Lease != lease {
		t.Fatalf("%s after alice's lock: %v %+v", there, r.Code, r.Holders)
	}
	if r := erin.Do(&wire.Request{Op: wire.OpAcquire, Path: there + "/x", Lease: lease, TTL: 30000}); r.Code != wire.Unauthorized {
		t.Fatalf("erin under alice's lease once it exists there: %v %q", r.Code, r.Msg)
	}
	if st := s.State(); st != client.Connected {
		t.Fatalf("alice's session is %v", st)
	}
}

// TestSingleLockLeaseBoundToIdentity: with auth on, a lock taken without a
// session (client.Acquire) belongs to the identity that took it. Erin, with
// the same lock permission and the token read from the holders, cannot
// renew or release it (Unauthorized, the lock unchanged); alice can.
func TestSingleLockLeaseBoundToIdentity(t *testing.T) {
	c, addr := authCluster(t)
	ctx := ctxT(t, 60*time.Second)
	path, _ := pathsOnTwoShards(t, c)

	cl, err := client.New(ctx, []string{addr}, client.WithCredentials("alice-token"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	l, err := cl.Acquire(ctx, path, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	erin, _ := nodetest.DialWire(t, addr, nil, "erin-token", 0)
	info := erin.Do(&wire.Request{Op: wire.OpLockInfo, Path: path})
	if len(info.Holders) != 1 || info.Holders[0].Token != l.Token() {
		t.Fatalf("erin reads the token: %v %+v", info.Code, info.Holders)
	}
	for _, tc := range []struct {
		name string
		req  *wire.Request
	}{
		{"renew", &wire.Request{Op: wire.OpRenew, Path: path, Token: l.Token(), TTL: 60000}},
		{"renew naming the lease", &wire.Request{Op: wire.OpRenew, Path: path, Token: l.Token(), Lease: l.Lease(), TTL: 60000}},
		{"release", &wire.Request{Op: wire.OpRelease, Path: path, Token: l.Token()}},
		{"release naming the lease", &wire.Request{Op: wire.OpRelease, Path: path, Token: l.Token(), Lease: l.Lease()}},
		{"revoke the lease", &wire.Request{Op: wire.OpRevoke, Lease: l.Lease()}},
	} {
		if r := erin.Do(tc.req); r.Code != wire.Unauthorized || r.Msg == "" {
			t.Fatalf("erin's %s: %v %q, want Unauthorized", tc.name, r.Code, r.Msg)
		}
	}
	after := erin.Do(&wire.Request{Op: wire.OpLockInfo, Path: path})
	if len(after.Holders) != 1 || after.Holders[0].Token != l.Token() || after.Holders[0].Count != 1 {
		t.Fatalf("the refusals changed the lock: %+v", after.Holders)
	}
	if err := l.Renew(ctx, 30*time.Second); err != nil {
		t.Fatalf("alice renews: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("alice releases: %v", err)
	}
	if r := erin.Do(&wire.Request{Op: wire.OpLockInfo, Path: path}); r.Code != wire.NotFound {
		t.Fatalf("after alice's release: %v %+v", r.Code, r.Holders)
	}
}

// authCluster starts a cluster with testPolicy and namespaces three
// segments deep, so paths under /locks/billing spread over the shards.
func authCluster(t *testing.T) (*nodetest.Cluster, string) {
	pol, err := auth.Parse([]byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	c := nodetest.Start(t, nodetest.Options{Edit: func(cfg *node.Config) {
		cfg.Auth, cfg.NamespaceDepth = pol, 3
	}})
	return c, c.AllEndpoints()[0]
}

// pathsOnTwoShards returns two lockable paths (billing role) on different shards.
func pathsOnTwoShards(t *testing.T, c *nodetest.Cluster) (string, string) {
	first := "/locks/billing/sq-0"
	for i := 1; i < 200; i++ {
		p := fmt.Sprintf("/locks/billing/sq-%d", i)
		if shardOf(t, c, p) != shardOf(t, c, first) {
			return first, p
		}
	}
	t.Fatal("no two billing paths on different shards")
	return "", ""
}
