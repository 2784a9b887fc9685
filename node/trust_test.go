package node_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wardenlock/warden/auth"
	"github.com/wardenlock/warden/fence"
	"github.com/wardenlock/warden/node"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/wire"
)

// The hostile-tenant suite: a TLS cluster with the role layout of
// docs/security.md, and identities that attack each other with every number
// the protocol lets a client choose. Each attack is a named test that
// checks the victim's state is untouched: its lock info, its tokens and its
// next answer. The attacks work on a server that keys exactly-once records,
// waits and signatures by what the client sends; the commit that added this
// suite shows where each one failed there.

const trustPolicy = `
tokens:
  reader-token: reader
  billing-token: billing
  billing2-token: billing2
  other-token: other
  ci-token: ci
  admin-token: admin
identities:
  reader: [reader]
  billing: [billing]
  billing2: [billing]
  other: [other]
  ci: [reader, deployer]
  admin: [admin]
roles:
  billing:
    - {prefix: /locks/billing, perms: [lock, read, watch]}
  other:
    - {prefix: /locks/other, perms: [lock, read, watch]}
  reader:
    - {prefix: /, perms: [read]}
  deployer:
    - {prefix: /locks/deploy/prod, perms: [lock]}
    - {prefix: /config/deploy, perms: [kv-write, watch]}
  admin:
    - {prefix: /, perms: [all]}
peer-secret: cluster-secret
`

// trustEnv is a running TLS cluster with trustPolicy and a signing key.
type trustEnv struct {
	c    *nodetest.Cluster
	addr string
	tls  *tls.Config
	pub  ed25519.PublicKey
}

func startTrust(t *testing.T, edit func(*node.Config)) *trustEnv {
	t.Helper()
	dir := t.TempDir()
	if err := (auth.DevCerts{Dir: dir}).Generate(); err != nil {
		t.Fatal(err)
	}
	pol, err := auth.Parse([]byte(trustPolicy))
	if err != nil {
		t.Fatal(err)
	}
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	c := nodetest.Start(t, nodetest.Options{Edit: func(cfg *node.Config) {
		files := auth.DirFiles(dir)
		cfg.TLS, cfg.Auth, cfg.SigningKey, cfg.NamespaceDepth = &files, pol, priv, 3
		if edit != nil {
			edit(cfg)
		}
	}})
	tc, err := auth.ClientConfig(filepath.Join(dir, auth.CAFile), "", "")
	if err != nil {
		t.Fatal(err)
	}
	return &trustEnv{c: c, addr: c.AllEndpoints()[0], tls: tc, pub: pub}
}

// dial connects as identity (its token) with client id client in Hello.
func (e *trustEnv) dial(t *testing.T, identity string, client uint64) *nodetest.WireConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", e.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tc := e.tls.Clone()
	tc.ServerName = "127.0.0.1"
	tlsConn := tls.Client(nc, tc)
	t.Cleanup(func() { tlsConn.Close() })
	w := nodetest.NewWireConn(t, tlsConn)
	if r := w.Do(&wire.Request{Op: wire.OpHello, Rev: wire.ProtocolVersion, Auth: identity + "-token", Client: client}); r.Code != wire.OK {
		t.Fatalf("hello as %s: %v %s", identity, r.Code, r.Msg)
	}
	return w
}

// sameShard returns a path under prefix served by the shard of path.
func sameShard(t *testing.T, c *nodetest.Cluster, prefix, path string) string {
	t.Helper()
	want := shardOf(t, c, path)
	for i := 0; i < 500; i++ {
		p := fmt.Sprintf("%s/n%d/x", prefix, i)
		if shardOf(t, c, p) == want {
			return p
		}
	}
	t.Fatalf("no path under %s on the shard of %s", prefix, path)
	return ""
}

// holders reads path's holders and waiters as the admin.
func (e *trustEnv) lockInfo(t *testing.T, path string) *wire.Response {
	t.Helper()
	r := e.dial(t, "admin", 0).Do(&wire.Request{Op: wire.OpLockInfo, Path: path})
	if r.Code != wire.OK && r.Code != wire.NotFound {
		t.Fatalf("lockinfo %s: %v %s", path, r.Code, r.Msg)
	}
	return r
}

// mustHold checks that path has exactly one holder, with token.
func (e *trustEnv) mustHold(t *testing.T, path string, token uint64) {
	t.Helper()
	if info := e.lockInfo(t, path); len(info.Holders) != 1 || info.Holders[0].Token != token {
		t.Fatalf("%s: holders %+v, want only token %d", path, info.Holders, token)
	}
}

// leaseKey returns a session lease id and the key that proves it.
func leaseKey(seed uint64) (id, key uint64) {
	for key = seed; ; key++ {
		if id = wire.LeaseID(key); id != 0 {
			return id, key
		}
	}
}

func TestHostileTenants(t *testing.T) {
	var logs syncBuffer
	e := startTrust(t, func(cfg *node.Config) { cfg.Log = newInfoLogger(&logs) })

	// Records under the victim's client id: the reader (read permission
	// only) sends session requests, which need no permission, with the
	// victim's Client and Seq 1..20, hoping the victim's acquire is answered
	// from them (OK with token 0, the path left free for a second holder).
	// The reader's requests land under its own owned id: the victim is
	// granted, and holds the lock alone.
	t.Run("forged grant through another client's records", func(t *testing.T) {
		const victimID = 0x51c7_0001
		path := "/locks/billing/payments/critical"
		reader := e.dial(t, "reader", 0)
		lease, key := leaseKey(7001)
		for seq := uint64(1); seq <= 20; seq++ {
			r := reader.Do(&wire.Request{Op: wire.OpSession, Path: path, Lease: lease, LeaseKey: key, TTL: 10_000,
				Client: victimID, Seq: seq})
			if r.Code != wire.OK {
				t.Fatalf("reader's session request: %v %s", r.Code, r.Msg)
			}
		}
		victim := e.dial(t, "billing", victimID)
		got := victim.Do(&wire.Request{Op: wire.OpAcquire, Path: path, TTL: 10_000, Client: victimID, Seq: 1})
		if got.Code != wire.OK || got.Token == 0 {
			t.Fatalf("the victim's acquire: %v token %d %q, want a grant with a token", got.Code, got.Token, got.Msg)
		}
		e.mustHold(t, path, got.Token)
		second := e.dial(t, "billing2", 0).Do(&wire.Request{Op: wire.OpAcquire, Path: path, TTL: 10_000})
		if second.Code != wire.Conflict {
			t.Fatalf("a second client's try: %v, want Conflict (one holder)", second.Code)
		}
		if r := victim.Do(&wire.Request{Op: wire.OpRelease, Path: path, Token: got.Token, Client: victimID, Seq: 2}); r.Code != wire.OK {
			t.Fatalf("the victim's release: %v %s", r.Code, r.Msg)
		}
	})

	// Replaying another client's signed acquire: billing2 sends the
	// victim's (Client, Seq) with FlagSigned on the victim's path, hoping
	// for the victim's token with a valid signature for a lock billing2
	// does not hold. It is a new request of billing2's: refused.
	t.Run("signed replay of another client's grant", func(t *testing.T) {
		const victimID = 0x51c7_0002
		path := "/locks/billing/ledger/write"
		victim := e.dial(t, "billing", victimID)
		mine := victim.Do(&wire.Request{Op: wire.OpAcquire, Path: path, TTL: 10_000, Flags: wire.FlagSigned,
			Client: victimID, Seq: 1})
		if mine.Code != wire.OK || mine.Signed == nil {
			t.Fatalf("the victim's signed acquire: %v %s signed=%v", mine.Code, mine.Msg, mine.Signed)
		}
		replay := e.dial(t, "billing2", 0).Do(&wire.Request{Op: wire.OpAcquire, Path: path, TTL: 10_000,
			Flags: wire.FlagSigned, Client: victimID, Seq: 1})
		if replay.Code == wire.OK || replay.Signed != nil || replay.Token != 0 {
			t.Fatalf("billing2's replay: %v token %d signed %v, want a refusal without a signature",
				replay.Code, replay.Token, replay.Signed != nil)
		}
		e.mustHold(t, path, mine.Token)
		again := victim.Do(&wire.Request{Op: wire.OpAcquire, Path: path, TTL: 10_000, Flags: wire.FlagSigned,
			Client: victimID, Seq: 1})
		if again.Code != wire.OK || again.Token != mine.Token {
			t.Fatalf("the victim's own retry: %v token %d, want its grant %d", again.Code, again.Token, mine.Token)
		}
	})

	// One request with Seq = AckSeq = 2^62 under the victim's client id,
	// to raise the victim's floor on that shard so that its later requests
	// answer Ambiguous. It raises the reader's own floor only.
	t.Run("acknowledged floor pushed to 2^62", func(t *testing.T) {
		const victimID = 0x51c7_0003
		path := "/locks/billing/floor/a"
		lease, key := leaseKey(7003)
		r := e.dial(t, "reader", 0).Do(&wire.Request{Op: wire.OpSession, Path: path, Lease: lease, LeaseKey: key,
			TTL: 10_000, Client: victimID, Seq: 1 << 62, AckSeq: 1 << 62})
		if r.Code != wire.OK {
			t.Fatalf("reader's request: %v %s", r.Code, r.Msg)
		}
		victim := e.dial(t, "billing", victimID)
		got := victim.Do(&wire.Request{Op: wire.OpAcquire, Path: path, TTL: 10_000, Client: victimID, Seq: 3, AckSeq: 3})
		if got.Code != wire.OK || got.Token == 0 {
			t.Fatalf("the victim's acquire: %v %q, want a grant", got.Code, got.Msg)
		}
		e.mustHold(t, path, got.Token)
	})

	// A grant recorded under the victim's next Seq: billing2 acquires and
	// releases a path with the victim's (Client, Seq), so that the victim's
	// own acquire with that Seq would be answered Cancelled. The victim
	// gets its own grant.
	t.Run("another identity's grant under the victim's seq", func(t *testing.T) {
		const victimID = 0x51c7_0004
		path := "/locks/billing/seq/b"
		attacker := e.dial(t, "billing2", 0)
		a := attacker.Do(&wire.Request{Op: wire.OpAcquire, Path: path, TTL: 10_000, Client: victimID, Seq: 1})
		if a.Code != wire.OK {
			t.Fatalf("attacker's acquire: %v %s", a.Code, a.Msg)
		}
		if r := attacker.Do(&wire.Request{Op: wire.OpRelease, Path: path, Token: a.Token, Client: victimID, Seq: 2}); r.Code != wire.OK {
			t.Fatalf("attacker's release: %v %s", r.Code, r.Msg)
		}
		got := e.dial(t, "billing", victimID).Do(&wire.Request{Op: wire.OpAcquire, Path: path, TTL: 10_000, Client: victimID, Seq: 1})
		if got.Code != wire.OK || got.Token == 0 || got.Token == a.Token {
			t.Fatalf("the victim's acquire: %v token %d %q, want its own grant", got.Code, got.Token, got.Msg)
		}
		e.mustHold(t, path, got.Token)
	})

	// Cancelling another tenant's wait: the victim waits for a lock; other
	// (lock permission on /locks/other only) cancels by the victim's
	// (Client, Seq) with a path of its own on the same shard, and billing2
	// with the victim's path. Neither reaches the victim's wait, which
	// stays queued and is granted when the lock is released.
	t.Run("cancelling another tenant's wait", func(t *testing.T) {
		const victimID = 0x51c7_0005
		path := "/locks/billing/queue/c"
		holderConn := e.dial(t, "billing2", 0)
		held := holderConn.Do(&wire.Request{Op: wire.OpAcquire, Path: path, TTL: 30_000})
		if held.Code != wire.OK {
			t.Fatalf("holder: %v %s", held.Code, held.Msg)
		}
		victim := e.dial(t, "billing", victimID)
		waitID := victim.Send(&wire.Request{Op: wire.OpAcquire, Path: path, TTL: 30_000, Wait: wire.WaitForever,
			Client: victimID, Seq: 1})
		e.waitQueued(t, path, 1)
		otherPath := sameShard(t, e.c, "/locks/other", path)
		for _, tc := range []struct {
			who  string
			path string
		}{{"other", otherPath}, {"billing2", path}} {
			r := e.dial(t, tc.who, 0).Do(&wire.Request{Op: wire.OpCancel, Path: tc.path, Client: victimID, Seq: 1})
			if r.Code == wire.OK && r.Token != 0 {
				t.Fatalf("%s's cancel took the victim's grant: token %d", tc.who, r.Token)
			}
		}
		if info := e.lockInfo(t, path); len(info.Waiters) != 1 || len(info.Holders) != 1 || info.Holders[0].Token != held.Token {
			t.Fatalf("after the cancels: holders %+v waiters %+v, want the victim still queued", info.Holders, info.Waiters)
		}
		if r := holderConn.Do(&wire.Request{Op: wire.OpRelease, Path: path, Token: held.Token}); r.Code != wire.OK {
			t.Fatalf("release: %v %s", r.Code, r.Msg)
		}
		for {
			r := victim.Recv(20 * time.Second)
			if r == nil {
				t.Fatal("the victim's wait got no answer")
			}
			if r.ID != waitID {
				continue
			}
			if r.Code != wire.OK || r.Token == 0 {
				t.Fatalf("the victim's wait ended %v %q, want the grant", r.Code, r.Msg)
			}
			e.mustHold(t, path, r.Token)
			break
		}
	})

	// A 10 s session asks for a signature with a TTL of ten years, then of
	// 600 s, to get a signed expiry far beyond its lease. The ten-year TTL
	// is refused; the signature's expiry is the lease's deadline.
	t.Run("signed expiry is the lease's, not the request's", func(t *testing.T) {
		conn := e.dial(t, "billing", 0)
		path := "/locks/billing/signed/ttl"
		lease, key := leaseKey(7006)
		if r := conn.Do(&wire.Request{Op: wire.OpSession, Path: path, Lease: lease, LeaseKey: key, TTL: 10_000}); r.Code != wire.OK {
			t.Fatalf("session: %v %s", r.Code, r.Msg)
		}
		tenYears := int64(10 * 365 * 24 * time.Hour / time.Millisecond)
		r := conn.Do(&wire.Request{Op: wire.OpAcquire, Path: path, Lease: lease, LeaseKey: key, TTL: tenYears, Flags: wire.FlagSigned})
		if r.Code != wire.InvalidArgument {
			t.Fatalf("a ten-year TTL on an existing lease: %v (signed %v), want InvalidArgument", r.Code, r.Signed != nil)
		}
		got := conn.Do(&wire.Request{Op: wire.OpAcquire, Path: path, Lease: lease, LeaseKey: key, TTL: 600_000, Flags: wire.FlagSigned})
		answered := time.Now()
		if got.Code != wire.OK || got.Signed == nil {
			t.Fatalf("signed acquire: %v %s signed=%v", got.Code, got.Msg, got.Signed)
		}
		if exp := time.UnixMilli(got.Signed.Expiry); exp.After(answered.Add(10*time.Second)) || exp.Before(answered.Add(5*time.Second)) {
			t.Fatalf("signed expiry %v: want within the 10 s lease (answered %v)", exp, answered)
		}
		s, err := fence.FromGrant(path, got.Token, got.Signed)
		if err != nil {
			t.Fatal(err)
		}
		if err := (&fence.Verifier{Key: e.pub}).VerifyExclusive(s); err != nil {
			t.Fatalf("the exclusive grant's signature: %v", err)
		}
	})

	// A shared hold or a semaphore permit passed off as an exclusive lock:
	// the mode and the permits are signed.
	t.Run("signed grants carry the mode and the permits", func(t *testing.T) {
		conn := e.dial(t, "billing", 0)
		v := &fence.Verifier{Key: e.pub}
		for _, tc := range []struct {
			name    string
			req     *wire.Request
			mode    wire.Mode
			permits uint32
		}{
			{"shared", &wire.Request{Op: wire.OpAcquire, Path: "/locks/billing/signed/shared", Mode: wire.Shared, TTL: 10_000}, wire.Shared, 0},
			{"permit", &wire.Request{Op: wire.OpAcquire, Path: "/locks/billing/signed/sem", Permits: 3, TTL: 10_000}, wire.Shared, 3},
		} {
			tc.req.Flags |= wire.FlagSigned
			r := conn.Do(tc.req)
			if r.Code != wire.OK || r.Signed == nil {
				t.Fatalf("%s: %v %s", tc.name, r.Code, r.Msg)
			}
			s, _ := fence.FromGrant(tc.req.Path, r.Token, r.Signed)
			if s.Mode != tc.mode || s.Permits != tc.permits {
				t.Fatalf("%s: signed mode %v permits %d, want %v %d", tc.name, s.Mode, s.Permits, tc.mode, tc.permits)
			}
			if err := v.Verify(s); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if err := v.VerifyExclusive(s); !errors.Is(err, fence.ErrNotExclusive) {
				t.Fatalf("%s passed as exclusive: %v", tc.name, err)
			}
			forged := s
			forged.Mode, forged.Permits = wire.Exclusive, 0
			if err := v.Verify(forged); !errors.Is(err, fence.ErrBadSignature) {
				t.Fatalf("%s relabelled exclusive verified: %v", tc.name, err)
			}
		}
	})

	// Client ids and sequence numbers of other identities' waits are left
	// out for callers without admin on the path (lock info and watch
	// events); the admin sees them, and a client sees its own.
	t.Run("other clients' ids are not shown", func(t *testing.T) {
		const victimID = 0x51c7_0008
		path := "/locks/billing/shown/w"
		holder := e.dial(t, "billing2", 0)
		if r := holder.Do(&wire.Request{Op: wire.OpAcquire, Path: path, TTL: 30_000}); r.Code != wire.OK {
			t.Fatalf("holder: %v", r.Code)
		}
		watcher := e.dial(t, "billing2", 0)
		if r := watcher.Do(&wire.Request{Op: wire.OpWatch, Path: path}); r.Code != wire.OK {
			t.Fatalf("watch: %v %s", r.Code, r.Msg)
		}
		victim := e.dial(t, "billing", victimID)
		victim.Send(&wire.Request{Op: wire.OpAcquire, Path: path, TTL: 30_000, Wait: wire.WaitForever, Client: victimID, Seq: 1})
		for {
			r := watcher.Recv(20 * time.Second)
			if r == nil {
				t.Fatal("no queued event")
			}
			if ev := firstKind(r.Events, wire.EvQueued); ev != nil {
				if ev.Client != 0 || ev.Seq != 0 {
					t.Fatalf("billing2's watch shows billing's client %d seq %d", ev.Client, ev.Seq)
				}
				break
			}
		}
		owned := wire.OwnedClient("billing", victimID)
		for _, tc := range []struct {
			who  *nodetest.WireConn
			name string
			want uint64
		}{{e.dial(t, "reader", 0), "reader", 0}, {e.dial(t, "admin", 0), "admin", owned}, {victim, "the victim itself", owned}} {
			r := tc.who.Do(&wire.Request{Op: wire.OpLockInfo, Path: path})
			if len(r.Waiters) != 1 || r.Waiters[0].Client != tc.want {
				t.Fatalf("%s reads waiters %+v, want client %d", tc.name, r.Waiters, tc.want)
			}
		}
	})

	// Lease expiries are logged at info, at most one full line per shard
	// leader and 10 s interval (the rest are summed up in one line after
	// it): 20 expiries make at most 4 on 2 shards, should a leadership move
	// during the test.
	t.Run("lease expiries are summed up in the log", func(t *testing.T) {
		conn := e.dial(t, "admin", 0)
		for i := 0; i < 20; i++ {
			p := fmt.Sprintf("/locks/expiry/n%d/x", i)
			if r := conn.Do(&wire.Request{Op: wire.OpAcquire, Path: p, TTL: 1000}); r.Code != wire.OK {
				t.Fatalf("acquire %s: %v %s", p, r.Code, r.Msg)
			}
		}
		nodetest.WaitFor(t, 20*time.Second, "every lock expired", func() error {
			if r := conn.Do(&wire.Request{Op: wire.OpListLocks, Path: "/locks/expiry"}); r.Code != wire.OK || len(r.Holders) > 0 {
				return fmt.Errorf("%v, %d held", r.Code, len(r.Holders))
			}
			return nil
		})
		if n := strings.Count(logs.String(), `msg="lease expired" `); n == 0 || n > 4 {
			t.Fatalf("%d full lease-expiry lines for 20 expiries on 2 shards, want 1 to 4:\n%s", n, logs.String())
		}
	})

	// The cluster's layout and load need read on "/": range.list and shards
	// answer billing (lock and read on /locks/billing only) Unauthorized.
	t.Run("range list and shards need read on the root", func(t *testing.T) {
		for _, op := range []wire.Op{wire.OpRangeList, wire.OpShards} {
			if r := e.dial(t, "billing", 0).Do(&wire.Request{Op: op}); r.Code != wire.Unauthorized {
				t.Fatalf("billing's %v: %v, want Unauthorized", op, r.Code)
			}
			if r := e.dial(t, "reader", 0).Do(&wire.Request{Op: op}); r.Code != wire.OK {
				t.Fatalf("reader's %v: %v %s", op, r.Code, r.Msg)
			}
		}
	})
}

// waitQueued waits until path has n queued requests.
func (e *trustEnv) waitQueued(t *testing.T, path string, n int) {
	t.Helper()
	nodetest.WaitFor(t, 10*time.Second, path+" has its waiters", func() error {
		if got := len(e.lockInfo(t, path).Waiters); got != n {
			return fmt.Errorf("%d waiters, want %d", got, n)
		}
		return nil
	})
}

func newInfoLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func firstKind(evs []wire.Event, kind wire.EventKind) *wire.Event {
	for i := range evs {
		if evs[i].Kind == kind {
			return &evs[i]
		}
	}
	return nil
}

// TestIdentityQuotas: what one identity can create is bounded, with
// TooMany and nothing created (a refused acquire makes no lease either);
// other identities are not affected.
func TestIdentityQuotas(t *testing.T) {
	e := startTrust(t, func(cfg *node.Config) {
		cfg.SM.MaxOwnerLeases, cfg.SM.MaxOwnerLocks, cfg.SM.MaxOwnerWaiters = 4, 8, 2
		cfg.Router.Security.MaxIdentityWatches = 3
		cfg.Router.Security.Rate, cfg.Router.Security.Burst = 100, 100
	})
	path := "/locks/billing/quota/base"
	tooMany := func(t *testing.T, r *wire.Response, what string) {
		t.Helper()
		if r.Code != wire.TooMany || r.Msg == "" {
			t.Fatalf("%s: %v %q, want TooMany", what, r.Code, r.Msg)
		}
	}

	t.Run("leases, and refused acquires make none", func(t *testing.T) {
		conn := e.dial(t, "billing", 0)
		held := e.dial(t, "billing2", 0).Do(&wire.Request{Op: wire.OpAcquire, Path: path, TTL: 30_000})
		if held.Code != wire.OK {
			t.Fatalf("billing2 holds %s: %v", path, held.Code)
		}
		session := func(seed uint64) *wire.Response {
			id, key := leaseKey(seed)
			return conn.Do(&wire.Request{Op: wire.OpSession, Path: path, Lease: id, LeaseKey: key, TTL: 30_000})
		}
		for i := uint64(0); i < 3; i++ {
			if r := session(8000 + i); r.Code != wire.OK {
				t.Fatalf("session %d: %v %s", i, r.Code, r.Msg)
			}
		}
		// Refused acquires under new leases leave no lease behind: the
		// fourth lease still fits afterwards.
		for i := uint64(0); i < 5; i++ {
			id, key := leaseKey(8100 + i)
			if r := conn.Do(&wire.Request{Op: wire.OpAcquire, Path: path, Lease: id, LeaseKey: key, TTL: 30_000}); r.Code != wire.Conflict {
				t.Fatalf("acquire of a held lock: %v", r.Code)
			}
		}
		if r := session(8003); r.Code != wire.OK {
			t.Fatalf("the fourth lease after refused acquires: %v %q", r.Code, r.Msg)
		}
		tooMany(t, session(8004), "a fifth lease")
		id, key := leaseKey(8005)
		tooMany(t, conn.Do(&wire.Request{Op: wire.OpAcquire, Path: sameShard(t, e.c, "/locks/billing/quota", path), TTL: 30_000}), "a single-lock lease over the quota")
		tooMany(t, conn.Do(&wire.Request{Op: wire.OpAcquire, Path: path + "x", Lease: id, LeaseKey: key, TTL: 30_000}), "an acquire making a fifth lease")
		// billing2 is another identity: its own quota.
		id2, key2 := leaseKey(8200)
		if r := e.dial(t, "billing2", 0).Do(&wire.Request{Op: wire.OpSession, Path: path, Lease: id2, LeaseKey: key2, TTL: 30_000}); r.Code != wire.OK {
			t.Fatalf("billing2's session: %v %q", r.Code, r.Msg)
		}
		// Giving one back makes room.
		first, _ := leaseKey(8000)
		if r := conn.Do(&wire.Request{Op: wire.OpRevoke, Lease: first}); r.Code != wire.OK {
			t.Fatalf("revoke: %v %s", r.Code, r.Msg)
		}
		if r := session(8004); r.Code != wire.OK {
			t.Fatalf("a lease after one ended: %v %q", r.Code, r.Msg)
		}
	})

	t.Run("locks and waiters", func(t *testing.T) {
		conn, admin := e.dial(t, "other", 0), e.dial(t, "admin", 0)
		base := "/locks/other/quota/a"
		lease, key := leaseKey(8300)
		acq := func(p string, wait int64) *wire.Request {
			return &wire.Request{Op: wire.OpAcquire, Path: p, Lease: lease, LeaseKey: key, TTL: 30_000, Wait: wait, Owner: p}
		}
		var paths []string
		for i := 0; len(paths) < 7; i++ {
			if p := sameShard(t, e.c, fmt.Sprintf("/locks/other/quota/l%d", i), base); p != base {
				paths = append(paths, p)
			}
		}
		for _, p := range paths[:4] {
			if r := conn.Do(acq(p, wire.WaitNone)); r.Code != wire.OK {
				t.Fatalf("lock %s: %v %s", p, r.Code, r.Msg)
			}
		}
		// Two queued requests (the waiter quota) behind the admin's locks.
		for _, p := range paths[4:7] {
			if r := admin.Do(&wire.Request{Op: wire.OpAcquire, Path: p, TTL: 30_000}); r.Code != wire.OK {
				t.Fatalf("admin locks %s: %v", p, r.Code)
			}
		}
		conn.Send(acq(paths[4], wire.WaitForever))
		conn.Send(acq(paths[5], wire.WaitForever))
		e.waitQueued(t, paths[5], 1)
		tooMany(t, conn.Do(acq(paths[6], wire.WaitForever)), "a third queued request")
		if info := e.lockInfo(t, paths[6]); len(info.Waiters) != 0 {
			t.Fatalf("the refused wait was queued: %+v", info.Waiters)
		}
		// 4 locks + 2 queued of a quota of 8: two more locks, then no more.
		for _, p := range []string{base, "/locks/other/quota/b"} {
			if r := conn.Do(acq(p, wire.WaitNone)); r.Code != wire.OK {
				t.Fatalf("lock %s: %v %s", p, r.Code, r.Msg)
			}
		}
		tooMany(t, conn.Do(acq("/locks/other/quota/c", wire.WaitNone)), "a ninth lock")
		if info := e.lockInfo(t, "/locks/other/quota/c"); len(info.Holders) != 0 {
			t.Fatalf("the refused lock was granted: %+v", info.Holders)
		}
		// billing2 is another identity, with its own quota on the shard.
		if r := e.dial(t, "billing2", 0).Do(&wire.Request{Op: wire.OpAcquire, Path: sameShard(t, e.c, "/locks/billing", base), TTL: 30_000}); r.Code != wire.OK {
			t.Fatalf("billing2's lock: %v %q", r.Code, r.Msg)
		}
	})

	t.Run("watches per identity", func(t *testing.T) {
		a, b := e.dial(t, "billing2", 0), e.dial(t, "billing2", 0)
		for i, w := range []*nodetest.WireConn{a, a, b} {
			if r := w.Do(&wire.Request{Op: wire.OpWatch, Path: fmt.Sprintf("/locks/billing/w%d/x", i)}); r.Code != wire.OK {
				t.Fatalf("watch %d: %v %s", i, r.Code, r.Msg)
			}
		}
		tooMany(t, b.Do(&wire.Request{Op: wire.OpWatch, Path: "/locks/billing/w9/x"}), "a fourth watch of billing2")
		if r := e.dial(t, "billing", 0).Do(&wire.Request{Op: wire.OpWatch, Path: "/locks/billing/w9/x"}); r.Code != wire.OK {
			t.Fatalf("billing's own watch: %v %s", r.Code, r.Msg)
		}
		if r := a.Do(&wire.Request{Op: wire.OpUnwatch, Stream: 2}); r.Code != wire.OK {
			t.Fatalf("unwatch: %v %s", r.Code, r.Msg)
		}
		if r := b.Do(&wire.Request{Op: wire.OpWatch, Path: "/locks/billing/w9/x"}); r.Code != wire.OK {
			t.Fatalf("a watch after an unwatch: %v %s", r.Code, r.Msg)
		}
	})

	t.Run("a prefix watch over every shard counts as one watch", func(t *testing.T) {
		a, b := e.dial(t, "other", 0), e.dial(t, "other", 0)
		// At namespace depth 3, /locks/other spans every shard.
		for i, w := range []*nodetest.WireConn{a, a, b} {
			r := w.Do(&wire.Request{Op: wire.OpWatch, Path: "/locks/other", Flags: wire.FlagPrefix})
			if r.Code != wire.OK || len(r.Position) != len(e.c.ShardIDs()) {
				t.Fatalf("prefix watch %d: %v %s, position %v", i, r.Code, r.Msg, r.Position)
			}
		}
		tooMany(t, b.Do(&wire.Request{Op: wire.OpWatch, Path: "/locks/other", Flags: wire.FlagPrefix}), "a fourth watch of other")
		if r := e.dial(t, "other", 0).Do(&wire.Request{Op: wire.OpWatch, Path: "/locks", Flags: wire.FlagPrefix}); r.Code != wire.Unauthorized {
			t.Fatalf("a prefix watch over more than other may read: %v %s, want Unauthorized", r.Code, r.Msg)
		}
	})

	t.Run("request rate per identity", func(t *testing.T) {
		flood := e.dial(t, "ci", 0)
		var refused int
		for i := 0; i < 300; i++ {
			flood.Send(&wire.Request{Op: wire.OpKVGet, Path: "/config/deploy/x"})
		}
		for i := 0; i < 300; i++ {
			r := flood.Recv(20 * time.Second)
			if r == nil {
				t.Fatal("an answer is missing")
			}
			if r.Code == wire.TooMany {
				if r.TTL <= 0 {
					t.Fatalf("TooMany without a retry hint: %+v", r)
				}
				refused++
			}
		}
		if refused == 0 {
			t.Fatal("300 requests at once passed a rate of 100/s, burst 100")
		}
		if r := e.dial(t, "reader", 0).Do(&wire.Request{Op: wire.OpKVGet, Path: "/config/deploy/x"}); r.Code == wire.TooMany {
			t.Fatal("another identity was limited by ci's rate")
		}
	})

}
