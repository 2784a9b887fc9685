package node_test

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenlock/warden/auth"
	"github.com/wardenlock/warden/node"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/router"
	"github.com/wardenlock/warden/shard"
	"github.com/wardenlock/warden/statemachine"
	"github.com/wardenlock/warden/wire"
)

const testPolicy = `
tokens:
  alice-token: alice
  bob-token: bob
  root-token: root
  mallet-token: mallet
  erin-token: erin
identities:
  alice: [billing]
  erin: [billing]
  bob: [reader]
  carol: [config]
  root: [admin]
  mallet: [reader]
roles:
  billing:
    - {prefix: /locks/billing, perms: [lock, read, watch]}
  reader:
    - {prefix: /, perms: [read]}
  config:
    - {prefix: /config/app, perms: [kv-write, read]}
  admin:
    - {prefix: /, perms: [all]}
peer-secret: cluster-secret
`

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestPermissionsOverTLS: a TLS cluster (mutual TLS for Raft and forwarding)
// with auth on. Each permission is refused to an identity without it, with
// nothing changed, and granted to one with it; requests reach every shard,
// so forwarding between nodes works over TLS with node certificates.
func TestPermissionsOverTLS(t *testing.T) {
	dir := t.TempDir()
	if err := (auth.DevCerts{Dir: dir, Clients: []string{"carol", "dave"}}).Generate(); err != nil {
		t.Fatal(err)
	}
	pol, err := auth.Parse([]byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	audit := &syncBuffer{}
	c := nodetest.Start(t, nodetest.Options{Edit: func(cfg *node.Config) {
		files := auth.DirFiles(dir)
		cfg.TLS, cfg.Auth = &files, pol
		cfg.Router.Security.Audit = slog.New(slog.NewTextHandler(audit, nil))
	}})
	ca := filepath.Join(dir, auth.CAFile)
	tokenTLS, err := auth.ClientConfig(ca, "", "")
	if err != nil {
		t.Fatal(err)
	}
	carolTLS, err := auth.ClientConfig(ca, filepath.Join(dir, auth.ClientCert), filepath.Join(dir, auth.ClientKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	daveTLS, err := auth.ClientConfig(ca, filepath.Join(dir, "client-dave.pem"), filepath.Join(dir, "client-dave-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	nodeTLS, err := auth.DirFiles(dir).Load()
	if err != nil {
		t.Fatal(err)
	}
	addr := c.AllEndpoints()[0]
	as := func(token string, tc *tls.Config) *nodetest.WireConn {
		w, hello := nodetest.DialWire(t, addr, tc, token, 0)
		if hello.Code != wire.OK {
			t.Fatalf("hello as %q: %v %s", token, hello.Code, hello.Msg)
		}
		return w
	}
	alice, bob, root := as("alice-token", tokenTLS), as("bob-token", tokenTLS), as("root-token", tokenTLS)
	carol := as("", carolTLS)

	t.Run("handshake", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			token string
			tls   *tls.Config
			flags uint32
		}{
			{"no credentials", "", tokenTLS, 0},
			{"unknown token", "guess", tokenTLS, 0},
			{"certificate identity without roles", "", daveTLS, 0},
			{"client token claiming to be a peer", "alice-token", tokenTLS, wire.FlagPeer},
			{"client certificate claiming to be a peer", "", carolTLS, wire.FlagPeer},
		} {
			t.Run(tc.name, func(t *testing.T) {
				w, hello := nodetest.DialWire(t, addr, tc.tls, tc.token, tc.flags)
				if hello.Code != wire.Unauthorized || hello.Msg == "" {
					t.Fatalf("hello: %v %q, want Unauthorized with a message", hello.Code, hello.Msg)
				}
				if r := w.Recv(5 * time.Second); r != nil {
					t.Fatalf("connection still open after a refused hello: %+v", r)
				}
			})
		}
		if _, hello := nodetest.DialWire(t, addr, nodeTLS.Peer, "", wire.FlagPeer); hello.Code != wire.OK {
			t.Fatalf("node certificate as peer: %v %s", hello.Code, hello.Msg)
		}
	})

	// Paths on both shards, so some requests are forwarded to other nodes.
	held := []string{"/locks/billing/a1", "/locks/billing/b2", "/locks/billing/c3", "/locks/billing/d4"}
	tokens := map[string]uint64{}
	t.Run("lock granted to its holder of the prefix", func(t *testing.T) {
		for _, p := range held {
			r := alice.Do(&wire.Request{Op: wire.OpAcquire, Path: p, TTL: 30000})
			if r.Code != wire.OK || r.Token == 0 {
				t.Fatalf("alice acquire %s: %v %s", p, r.Code, r.Msg)
			}
			tokens[p] = r.Token
		}
	})

	refusals := []struct {
		name string
		who  *nodetest.WireConn
		req  *wire.Request
	}{
		{"lock without the perm", bob, &wire.Request{Op: wire.OpAcquire, Path: "/locks/billing/free", TTL: 30000}},
		{"lock on an ancestor of the grant", alice, &wire.Request{Op: wire.OpAcquire, Path: "/locks", TTL: 30000}},
		{"lock on a sibling sharing a name prefix", alice, &wire.Request{Op: wire.OpAcquire, Path: "/locks/billingX/a", TTL: 30000}},
		{"campaign without lock", bob, &wire.Request{Op: wire.OpCampaign, Path: "/locks/billing/elect", TTL: 30000, Value: []byte("b")}},
		{"release someone's lock without lock", bob, &wire.Request{Op: wire.OpRelease, Path: held[0], Token: 0}},
		{"cancel by path without lock", bob, &wire.Request{Op: wire.OpCancel, Path: held[0], Client: 1, Seq: 1}},
		{"read without read", carol, &wire.Request{Op: wire.OpLockInfo, Path: held[0]}},
		{"list a prefix above the grant", alice, &wire.Request{Op: wire.OpListLocks, Path: "/locks"}},
		{"watch without watch", bob, &wire.Request{Op: wire.OpWatch, Path: "/locks/billing", Flags: wire.FlagPrefix}},
		{"kv write without kv-write", alice, &wire.Request{Op: wire.OpKVPut, Path: "/config/app/x", Value: []byte("v")}},
		{"kv delete without kv-write", bob, &wire.Request{Op: wire.OpKVDelete, Path: "/config/app/keep"}},
	}
	t.Run("refused", func(t *testing.T) {
		if r := carol.Do(&wire.Request{Op: wire.OpKVPut, Path: "/config/app/keep", Value: []byte("1")}); r.Code != wire.OK {
			t.Fatalf("carol put: %v %s", r.Code, r.Msg)
		}
		for _, tc := range refusals {
			t.Run(tc.name, func(t *testing.T) {
				if tc.req.Op == wire.OpRelease {
					tc.req.Token = tokens[held[0]]
				}
				r := tc.who.Do(tc.req)
				if r.Code != wire.Unauthorized || !strings.Contains(r.Msg, "may not") {
					t.Fatalf("got %v %q, want Unauthorized", r.Code, r.Msg)
				}
			})
		}
	})
	t.Run("nothing changed by the refusals", func(t *testing.T) {
		for _, p := range held {
			r := root.Do(&wire.Request{Op: wire.OpLockInfo, Path: p})
			if r.Code != wire.OK || len(r.Holders) != 1 || r.Holders[0].Token != tokens[p] {
				t.Fatalf("%s after refusals: %v %+v", p, r.Code, r.Holders)
			}
		}
		for _, p := range []string{"/locks/billing/free", "/locks/billing/elect"} {
			r := root.Do(&wire.Request{Op: wire.OpLockInfo, Path: p})
			if len(r.Holders)+len(r.Waiters) != 0 {
				t.Fatalf("%s changed by a refused request: %+v %+v", p, r.Holders, r.Waiters)
			}
		}
		if r := root.Do(&wire.Request{Op: wire.OpKVGet, Path: "/config/app/x"}); r.Code != wire.NotFound {
			t.Fatalf("refused put left a key: %v", r.Code)
		}
		if r := root.Do(&wire.Request{Op: wire.OpKVGet, Path: "/config/app/keep"}); r.Code != wire.OK || string(r.Value) != "1" {
			t.Fatalf("refused delete removed the key: %v", r.Code)
		}
	})
	t.Run("granted", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			who  *nodetest.WireConn
			req  *wire.Request
		}{
			{"read anywhere", bob, &wire.Request{Op: wire.OpLockInfo, Path: held[1]}},
			{"list under the grant", alice, &wire.Request{Op: wire.OpListLocks, Path: "/locks/billing"}},
			{"watch under the grant", alice, &wire.Request{Op: wire.OpWatch, Path: "/locks/billing", Flags: wire.FlagPrefix}},
			{"kv write by certificate identity", carol, &wire.Request{Op: wire.OpKVPut, Path: "/config/app/y", Value: []byte("v")}},
			{"release by the holder", alice, &wire.Request{Op: wire.OpRelease, Path: held[0], Token: tokens[held[0]]}},
			{"status for anyone authenticated", carol, &wire.Request{Op: wire.OpStatus}},
			{"admin may lock anywhere", root, &wire.Request{Op: wire.OpAcquire, Path: "/locks/other/x", TTL: 30000}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if r := tc.who.Do(tc.req); r.Code != wire.OK {
					t.Fatalf("got %v %s", r.Code, r.Msg)
				}
			})
		}
	})
	t.Run("admin actions need admin and are audited", func(t *testing.T) {
		rt := c.Nodes[0].Router
		if err := rt.AuthorizeAdmin("root", "force-release", held[1]); err != nil {
			t.Fatal(err)
		}
		if err := rt.AuthorizeAdmin("alice", "force-release", held[1]); !errorsIsUnauthorized(err) {
			t.Fatalf("alice force-release: %v", err)
		}
		log := audit.String()
		for _, want := range []string{"identity=root op=force-release path=" + held[1] + " allowed=true",
			"identity=alice op=force-release path=" + held[1] + " allowed=false"} {
			if !strings.Contains(log, want) {
				t.Fatalf("audit log lacks %q:\n%s", want, log)
			}
		}
	})
}

func errorsIsUnauthorized(err error) bool {
	we, ok := err.(*wire.Error)
	return ok && we.Code == wire.Unauthorized
}

// TestLimits: every limit answers its typed error and the node keeps
// serving the same connection and everyone else. Auth is on over plaintext
// with a peer secret (the no-TLS way to authenticate forwarding).
func TestLimits(t *testing.T) {
	pol, err := auth.Parse([]byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	c := nodetest.Start(t, nodetest.Options{Edit: func(cfg *node.Config) {
		cfg.Auth = pol
		cfg.Router.MaxFrame = 8 << 10
		// MaxOversize 8: oversized frames are skipped 8 times before the
		// close (the default closes at the first, see TestHostileInput...).
		cfg.Router.Security = router.Security{MaxConnsPerAddr: 12, MaxWatches: 2, Rate: 40, Burst: 40, HelloTimeout: time.Second,
			MaxOversize: 8}
		cfg.SM = statemachine.DefaultConfig()
		cfg.SM.MaxWaiters = 2
		cfg.SM.MaxLeaseLock = 3
	}})
	addr := c.AllEndpoints()[0]
	as := func(token string) *nodetest.WireConn {
		w, hello := nodetest.DialWire(t, addr, nil, token, 0)
		if hello.Code != wire.OK {
			t.Fatalf("hello: %v %s", hello.Code, hello.Msg)
		}
		return w
	}
	root := as("root-token")
	stillServes := func(t *testing.T, w *nodetest.WireConn) {
		t.Helper()
		if r := w.Do(&wire.Request{Op: wire.OpKVPut, Path: "/limits/ok/k", Value: []byte("v")}); r.Code != wire.OK {
			t.Fatalf("after the limit: %v %s", r.Code, r.Msg)
		}
	}
	expect := func(t *testing.T, r *wire.Response, want wire.Code) {
		t.Helper()
		if r.Code != want || r.Msg == "" {
			t.Fatalf("got %v %q, want %v with a message", r.Code, r.Msg, want)
		}
	}

	t.Run("frame size", func(t *testing.T) {
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], 9<<10)
		root.NC.Write(append(hdr[:], make([]byte, 9<<10)...))
		expect(t, root.Recv(10*time.Second), wire.TooLarge)
		stillServes(t, root)
	})
	t.Run("repeated oversized frames close the connection", func(t *testing.T) {
		w := as("root-token")
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], 9<<10)
		frame := append(hdr[:], make([]byte, 9<<10)...)
		for i := 0; i < 9; i++ {
			w.NC.Write(frame)
		}
		n := 0
		for r := w.Recv(10 * time.Second); r != nil; r = w.Recv(10 * time.Second) {
			if r.Code != wire.TooLarge {
				t.Fatalf("got %v", r.Code)
			}
			n++
		}
		if n != 9 {
			t.Fatalf("%d TooLarge answers before the close, want 9", n)
		}
		stillServes(t, root)
	})
	t.Run("an oversized frame before the handshake closes the connection", func(t *testing.T) {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], 9<<10)
		nc.Write(append(hdr[:], make([]byte, 9<<10)...))
		w := nodetest.NewWireConn(t, nc)
		if r := w.Recv(10 * time.Second); r == nil || r.Code != wire.TooLarge {
			t.Fatalf("first answer %+v", r)
		}
		if r := w.Recv(10 * time.Second); r != nil {
			t.Fatalf("still open: %+v", r)
		}
	})
	t.Run("handshake timeout", func(t *testing.T) {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		start := time.Now()
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := nc.Read(make([]byte, 1)); err == nil || time.Since(start) > 5*time.Second {
			t.Fatalf("a silent connection was kept for %v (%v)", time.Since(start), err)
		}
	})
	t.Run("path length", func(t *testing.T) {
		expect(t, root.Do(&wire.Request{Op: wire.OpKVGet, Path: "/limits/" + strings.Repeat("p", 600)}), wire.InvalidArgument)
		stillServes(t, root)
	})
	t.Run("waiters per lock", func(t *testing.T) {
		p := "/limits/w/lock"
		expect(t, &wire.Response{Code: root.Do(&wire.Request{Op: wire.OpAcquire, Path: p, TTL: 30000}).Code, Msg: "-"}, wire.OK)
		for i := 0; i < 2; i++ {
			w := as("root-token")
			w.Send(&wire.Request{Op: wire.OpAcquire, Path: p, TTL: 30000, Wait: wire.WaitForever})
		}
		waitFor(t, func() bool { return len(root.Do(&wire.Request{Op: wire.OpLockInfo, Path: p}).Waiters) == 2 })
		refusedBefore := shard.PrecheckRefusals()
		expect(t, root.Do(&wire.Request{Op: wire.OpAcquire, Path: p, TTL: 30000, Wait: wire.WaitForever}), wire.TooMany)
		if shard.PrecheckRefusals() != refusedBefore+1 {
			t.Fatal("the over-limit waiter was proposed: the shard leader must refuse it before Raft")
		}
		if n := len(root.Do(&wire.Request{Op: wire.OpLockInfo, Path: p}).Waiters); n != 2 {
			t.Fatalf("%d waiters after the refusal, want 2", n)
		}
		stillServes(t, root)
	})
	t.Run("locks per session", func(t *testing.T) {
		const key = 0x1234_5678
		lease := wire.LeaseID(key) // auth is on: creating the lease needs its key
		for _, s := range []string{"a", "b", "c"} {
			if r := root.Do(&wire.Request{Op: wire.OpAcquire, Path: "/limits/s/" + s, Lease: lease, LeaseKey: key, TTL: 30000}); r.Code != wire.OK {
				t.Fatalf("lock %s: %v %s", s, r.Code, r.Msg)
			}
		}
		refusedBefore := shard.PrecheckRefusals()
		expect(t, root.Do(&wire.Request{Op: wire.OpAcquire, Path: "/limits/s/d", Lease: lease, TTL: 30000}), wire.TooMany)
		if shard.PrecheckRefusals() != refusedBefore+1 {
			t.Fatal("the over-limit lock was proposed: the shard leader must refuse it before Raft")
		}
		expect(t, root.Do(&wire.Request{Op: wire.OpLockInfo, Path: "/limits/s/d"}), wire.NotFound)
		stillServes(t, root)
	})
	t.Run("watches per connection", func(t *testing.T) {
		w := as("root-token")
		var streams []uint64
		for i := 0; i < 2; i++ {
			r := w.Do(&wire.Request{Op: wire.OpWatch, Path: "/limits/watch", Flags: wire.FlagPrefix})
			if r.Code != wire.OK {
				t.Fatalf("watch %d: %v %s", i, r.Code, r.Msg)
			}
			streams = append(streams, r.Stream)
		}
		expect(t, w.Do(&wire.Request{Op: wire.OpWatch, Path: "/limits/watch"}), wire.TooMany)
		if r := w.Do(&wire.Request{Op: wire.OpUnwatch, Stream: streams[0]}); r.Code != wire.OK {
			t.Fatalf("unwatch: %v", r.Code)
		}
		if r := w.Do(&wire.Request{Op: wire.OpWatch, Path: "/limits/watch"}); r.Code != wire.OK {
			t.Fatalf("watch after unwatch: %v %s", r.Code, r.Msg)
		}
		stillServes(t, w)
	})
	t.Run("request rate per identity", func(t *testing.T) {
		mallet, bob := as("mallet-token"), as("bob-token")
		for i := 0; i < 120; i++ {
			mallet.Send(&wire.Request{Op: wire.OpKVGet, Path: "/limits/ok/k"})
		}
		var limited *wire.Response
		for i := 0; i < 120; i++ {
			if r := mallet.Recv(20 * time.Second); r != nil && r.Code == wire.TooMany {
				limited = r
			}
		}
		if limited == nil || limited.TTL <= 0 || !strings.Contains(limited.Msg, "retry after") {
			t.Fatalf("no TooMany with a retry hint for a flood: %+v", limited)
		}
		if r := bob.Do(&wire.Request{Op: wire.OpKVGet, Path: "/limits/ok/k"}); r.Code != wire.OK {
			t.Fatalf("another identity was limited too: %v %s", r.Code, r.Msg)
		}
		time.Sleep(time.Duration(limited.TTL) * time.Millisecond)
		if r := mallet.Do(&wire.Request{Op: wire.OpKVGet, Path: "/limits/ok/k"}); r.Code != wire.OK {
			t.Fatalf("after the hinted wait: %v %s", r.Code, r.Msg)
		}
	})
	t.Run("peer flag needs the cluster secret", func(t *testing.T) {
		if _, hello := nodetest.DialWire(t, addr, nil, "alice-token", wire.FlagPeer); hello.Code != wire.Unauthorized {
			t.Fatalf("peer claim with a client token: %v", hello.Code)
		}
		if _, hello := nodetest.DialWire(t, addr, nil, "cluster-secret", wire.FlagPeer); hello.Code != wire.OK {
			t.Fatalf("peer with the secret: %v %s", hello.Code, hello.Msg)
		}
	})
	t.Run("connections per client address", func(t *testing.T) {
		far := c.AllEndpoints()[2]
		var refused *wire.Response
		var open []*nodetest.WireConn
		for i := 0; i < 20 && refused == nil; i++ {
			w, hello := nodetest.DialWire(t, far, nil, "bob-token", 0)
			if hello.Code == wire.TooMany {
				refused = hello
				break
			}
			open = append(open, w)
		}
		if refused == nil || !strings.Contains(refused.Msg, "too many connections") {
			t.Fatalf("20 connections from one address and none refused: %+v", refused)
		}
		open[0].NC.Close()
		waitFor(t, func() bool {
			_, hello := nodetest.DialWire(t, far, nil, "bob-token", 0)
			return hello.Code == wire.OK
		})
		stillServes(t, root)
	})
}

// TestLeasesBoundToIdentity: with auth on, a session lease belongs to the
// identity that created it. Erin has the same lock permission as alice and
// learns alice's lease id from a lock's holders, yet cannot acquire under
// it, reopen it, keep it alive or revoke it; each refusal is Unauthorized
// and changes nothing, and alice keeps using it. Locks on both shards, so
// some requests and keepalives are forwarded between nodes.
func TestLeasesBoundToIdentity(t *testing.T) {
	pol, err := auth.Parse([]byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	c := nodetest.Start(t, nodetest.Options{Edit: func(cfg *node.Config) { cfg.Auth = pol }})
	addr := c.AllEndpoints()[0]
	as := func(token string) *nodetest.WireConn {
		w, hello := nodetest.DialWire(t, addr, nil, token, 0)
		if hello.Code != wire.OK {
			t.Fatalf("hello: %v %s", hello.Code, hello.Msg)
		}
		return w
	}
	alice, erin := as("alice-token"), as("erin-token")
	const key = 0x5eed_0001
	lease := wire.LeaseID(key)
	held := []string{"/locks/billing/a1", "/locks/billing/b2", "/locks/billing/c3", "/locks/billing/d4"}
	for _, p := range held {
		if r := alice.Do(&wire.Request{Op: wire.OpAcquire, Path: p, Lease: lease, LeaseKey: key, TTL: 30000}); r.Code != wire.OK {
			t.Fatalf("alice acquire %s: %v %s", p, r.Code, r.Msg)
		}
	}
	info := erin.Do(&wire.Request{Op: wire.OpLockInfo, Path: held[0]})
	if len(info.Holders) != 1 || info.Holders[0].Lease != lease {
		t.Fatalf("erin reads the holder's lease: %+v", info.Holders)
	}
	for _, tc := range []struct {
		name string
		req  *wire.Request
	}{
		{"acquire under it", &wire.Request{Op: wire.OpAcquire, Path: "/locks/billing/erin", Lease: lease, TTL: 30000}},
		{"re-enter alice's lock", &wire.Request{Op: wire.OpAcquire, Path: held[1], Lease: lease, TTL: 30000}},
		{"reopen it as a session", &wire.Request{Op: wire.OpSession, Path: held[2], Lease: lease, TTL: 30000}},
		{"revoke it", &wire.Request{Op: wire.OpRevoke, Lease: lease}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := erin.Do(tc.req); r.Code != wire.Unauthorized || r.Msg == "" {
				t.Fatalf("got %v %q, want Unauthorized with a message", r.Code, r.Msg)
			}
		})
	}
	t.Run("keepalive", func(t *testing.T) {
		r := erin.Do(&wire.Request{Op: wire.OpKeepAlive, Lease: lease})
		if r.Code != wire.OK || len(r.Denied) != 1 || r.Denied[0] != lease || len(r.Leases) != 0 {
			t.Fatalf("erin's keepalive: %v %q denied=%v gone=%v", r.Code, r.Msg, r.Denied, r.Leases)
		}
		if r := alice.Do(&wire.Request{Op: wire.OpKeepAlive, Lease: lease}); r.Code != wire.OK || len(r.Denied)+len(r.Leases) != 0 {
			t.Fatalf("alice's keepalive: %v %q denied=%v gone=%v", r.Code, r.Msg, r.Denied, r.Leases)
		}
	})
	t.Run("nothing changed by the refusals", func(t *testing.T) {
		for _, p := range held {
			r := erin.Do(&wire.Request{Op: wire.OpLockInfo, Path: p})
			if r.Code != wire.OK || len(r.Holders) != 1 || r.Holders[0].Lease != lease || r.Holders[0].Count != 1 {
				t.Fatalf("%s: %v %+v", p, r.Code, r.Holders)
			}
		}
		if r := erin.Do(&wire.Request{Op: wire.OpLockInfo, Path: "/locks/billing/erin"}); r.Code != wire.NotFound {
			t.Fatalf("erin's refused acquire left %v %+v", r.Code, r.Holders)
		}
	})
	t.Run("the owner ends it", func(t *testing.T) {
		if r := alice.Do(&wire.Request{Op: wire.OpRevoke, Lease: lease}); r.Code != wire.OK {
			t.Fatalf("alice revoke: %v %s", r.Code, r.Msg)
		}
		for _, p := range held {
			if r := erin.Do(&wire.Request{Op: wire.OpLockInfo, Path: p}); r.Code != wire.NotFound {
				t.Fatalf("%s after the revoke: %v %+v", p, r.Code, r.Holders)
			}
		}
	})
}

// TestReadBudgetPushesBack: a client IP over its byte budget is not
// refused, it is read more slowly (the reader pauses, TCP pushes back):
// every request of a burst far over the budget is answered OK, the pauses
// are counted, and the node keeps serving.
func TestReadBudgetPushesBack(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 1, Shards: 1, Edit: func(cfg *node.Config) {
		cfg.Router.MaxFrame = 8 << 10
		cfg.Router.Security = router.Security{ByteRate: 256 << 10, ByteBurst: 16 << 10}
	}})
	w, hello := nodetest.DialWire(t, c.AllEndpoints()[0], nil, "", 0)
	if hello.Code != wire.OK {
		t.Fatalf("hello: %v", hello.Code)
	}
	before := router.ReadFloodStats().ReadsThrottled
	value := bytes.Repeat([]byte("v"), 4000)
	const n = 40 // 160 KB: ten times the bucket
	for i := 0; i < n; i++ {
		w.Send(&wire.Request{Op: wire.OpKVPut, Path: fmt.Sprintf("/budget/ns/k%d", i), Value: value})
	}
	for i := 0; i < n; i++ {
		r := w.Recv(30 * time.Second)
		if r == nil || r.Code != wire.OK {
			t.Fatalf("answer %d: %+v", i, r)
		}
	}
	if router.ReadFloodStats().ReadsThrottled == before {
		t.Fatal("160 KB against a 16 KB bucket and the reader never paused")
	}
	if r := w.Do(&wire.Request{Op: wire.OpKVGet, Path: "/budget/ns/k39"}); r.Code != wire.OK || len(r.Value) != len(value) {
		t.Fatalf("after the burst: %v", r.Code)
	}
}

// TestInflightLimitIsBackpressure documents MaxInflight: a connection with
// that many requests unanswered is not read further (TCP pushes back on the
// client) until one completes; nothing is refused or dropped.
func TestInflightLimitIsBackpressure(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 1, Shards: 1, Edit: func(cfg *node.Config) { cfg.Router.MaxInflight = 1 }})
	addr := c.AllEndpoints()[0]
	holder, _ := nodetest.DialWire(t, addr, nil, "", 0)
	waiter, _ := nodetest.DialWire(t, addr, nil, "", 0)
	h := holder.Do(&wire.Request{Op: wire.OpAcquire, Path: "/inflight/a/lock", TTL: 30000})
	if h.Code != wire.OK {
		t.Fatalf("acquire: %v", h.Code)
	}
	waiter.Send(&wire.Request{Op: wire.OpAcquire, Path: "/inflight/a/lock", TTL: 30000, Wait: wire.WaitForever})
	getID := waiter.Send(&wire.Request{Op: wire.OpKVGet, Path: "/inflight/a/k"})
	if r := waiter.Recv(500 * time.Millisecond); r != nil {
		t.Fatalf("answered while the connection's only slot is taken: %+v", r)
	}
	if r := holder.Do(&wire.Request{Op: wire.OpRelease, Path: "/inflight/a/lock", Token: h.Token}); r.Code != wire.OK {
		t.Fatalf("release: %v", r.Code)
	}
	got := map[uint64]wire.Code{}
	for len(got) < 2 {
		r := waiter.Recv(20 * time.Second)
		if r == nil {
			t.Fatalf("connection ended; got %v", got)
		}
		got[r.ID] = r.Code
	}
	if got[getID] != wire.NotFound || got[getID-1] != wire.OK {
		t.Fatalf("after the slot freed: %v", got)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
