package router

import (
	"bufio"
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/wardenlock/warden/auth"
	"github.com/wardenlock/warden/wire"
)

func TestOpPermissions(t *testing.T) {
	for _, tc := range []struct {
		req  wire.Request
		want auth.Perm
	}{
		{wire.Request{Op: wire.OpAcquire}, auth.Lock},
		{wire.Request{Op: wire.OpRelease}, auth.Lock},
		{wire.Request{Op: wire.OpRenew}, auth.Lock},
		{wire.Request{Op: wire.OpCampaign}, auth.Lock},
		{wire.Request{Op: wire.OpProclaim}, auth.Lock},
		{wire.Request{Op: wire.OpResign}, auth.Lock},
		{wire.Request{Op: wire.OpCancel, Path: "/a"}, auth.Lock},
		{wire.Request{Op: wire.OpCancel}, 0}, // one of this connection's own waits
		{wire.Request{Op: wire.OpLockInfo}, auth.Read},
		{wire.Request{Op: wire.OpListLocks}, auth.Read},
		{wire.Request{Op: wire.OpKVGet}, auth.Read},
		{wire.Request{Op: wire.OpKVList}, auth.Read},
		{wire.Request{Op: wire.OpLeader}, auth.Read},
		{wire.Request{Op: wire.OpWatch}, auth.Watch},
		{wire.Request{Op: wire.OpKVPut}, auth.KVWrite},
		{wire.Request{Op: wire.OpKVDelete}, auth.KVWrite},
		{wire.Request{Op: wire.OpStatus}, 0},
		{wire.Request{Op: wire.OpRanges}, 0},
		{wire.Request{Op: wire.OpKeepAlive}, 0},
		{wire.Request{Op: wire.OpAcquireMulti}, auth.Lock},
		{wire.Request{Op: wire.OpHandOver}, auth.Lock},
		{wire.Request{Op: wire.OpRevokeLock}, auth.Lock},                         // a waiter, on a revocable lock
		{wire.Request{Op: wire.OpRevokeLock, Flags: wire.FlagForce}, auth.Admin}, // any lock
	} {
		if got := opPerm(&tc.req); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.req.Op, got, tc.want)
		}
	}
}

func newTestServer(t *testing.T, cfg Config) *Server {
	s := New(cfg)
	t.Cleanup(func() { s.Close() })
	return s
}

// TestSlowWatchConsumerIsDropped: a watcher whose connection queue passes
// MaxOutBuffer loses the watch (TooMany push) instead of growing the queue.
func TestSlowWatchConsumerIsDropped(t *testing.T) {
	s := newTestServer(t, Config{MaxOutBuffer: 4096})
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := newConn(s, a, nil) // no writer: the client reads nothing
	c.watches[7] = &watch{shard: 2}
	sub := &connSub{c: c, stream: 7}
	ev := []wire.Event{{Rev: 1, Kind: wire.EvKVPut, Path: "/w/x", Value: bytes.Repeat([]byte("v"), 1000)}}
	sent := 0
	for sub.Send(ev) {
		sent++
		if sent > 100 {
			t.Fatal("queue grew past MaxOutBuffer without dropping the watch")
		}
	}
	if _, ok := c.watches[7]; ok {
		t.Fatal("dropped watch still registered")
	}
	r := bufio.NewReader(bytes.NewReader(c.out))
	var last wire.Response
	for {
		body, err := wire.ReadFrame(r, wire.DefaultMaxFrame, nil)
		if err != nil {
			break
		}
		last = wire.Response{}
		if err := wire.DecodeResponse(body, &last); err != nil {
			t.Fatal(err)
		}
	}
	if last.Code != wire.TooMany || last.Stream != 7 || !strings.Contains(last.Msg, "too slow") {
		t.Fatalf("last frame %+v, want TooMany ending stream 7", last)
	}
	if len(c.out) > 4096+2*1100 {
		t.Fatalf("queue %d bytes", len(c.out))
	}
}

func TestRateLimitPerIdentity(t *testing.T) {
	s := newTestServer(t, Config{Security: Security{Rate: 10, Burst: 3}})
	for i := 0; i < 3; i++ {
		if _, ok := s.takeToken("alice", wire.OpAcquire); !ok {
			t.Fatalf("request %d refused within the burst", i)
		}
	}
	wait, ok := s.takeToken("alice", wire.OpAcquire)
	if ok || wait <= 0 || wait > 200*time.Millisecond {
		t.Fatalf("over the burst: ok=%v wait=%v, want a refusal with a ~100ms hint", ok, wait)
	}
	if _, ok := s.takeToken("bob", wire.OpAcquire); !ok {
		t.Fatal("bob limited by alice's bucket")
	}
	if _, ok := s.takeToken("alice", wire.OpRelease); !ok {
		t.Fatal("a release must never be rate limited")
	}
	time.Sleep(wait)
	if _, ok := s.takeToken("alice", wire.OpAcquire); !ok {
		t.Fatal("refused after the hinted wait")
	}
}

// TestIdentityLimitsByDefault: with auth on, an identity's request rate
// and watch streams are bounded without any setting; with auth off the
// rate stays unlimited (anonymous clients are one trust domain); -1 turns
// the rate off.
func TestIdentityLimitsByDefault(t *testing.T) {
	pol, err := auth.Parse([]byte(permTestPolicy))
	if err != nil {
		t.Fatal(err)
	}
	on := newTestServer(t, Config{Security: Security{Policy: pol}}).cfg.Security
	if on.Rate != DefaultIdentityRate || on.Burst != DefaultIdentityRate || on.MaxIdentityWatches != DefaultIdentityWatches {
		t.Fatalf("auth on: rate %g burst %d watches %d", on.Rate, on.Burst, on.MaxIdentityWatches)
	}
	if off := newTestServer(t, Config{}).cfg.Security; off.Rate != 0 {
		t.Fatalf("auth off: rate %g, want unlimited", off.Rate)
	}
	s := newTestServer(t, Config{Security: Security{Policy: pol, Rate: -1}})
	for i := 0; i < 3*DefaultIdentityRate; i++ {
		if _, ok := s.takeToken("holder", wire.OpAcquire); !ok {
			t.Fatalf("request %d refused with the rate turned off", i)
		}
	}
}

func TestConnsPerAddress(t *testing.T) {
	s := newTestServer(t, Config{Security: Security{MaxConnsPerAddr: 2}})
	conns := make([]net.Conn, 3)
	for i := range conns {
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		conns[i] = a
		if i == 2 {
			go func() { // the refused connection gets a TooMany frame
				body, err := wire.ReadFrame(bufio.NewReader(b), wire.DefaultMaxFrame, nil)
				var r wire.Response
				if err == nil && wire.DecodeResponse(body, &r) == nil && r.Code != wire.TooMany {
					t.Errorf("refusal frame %+v", r)
				}
			}()
		}
	}
	if s.admitConn(conns[0]) == nil || s.admitConn(conns[1]) == nil {
		t.Fatal("refused under the limit")
	}
	if s.admitConn(conns[2]) != nil {
		t.Fatal("third connection from one address admitted")
	}
	s.releaseConn(conns[0])
	if s.admitConn(conns[0]) == nil {
		t.Fatal("refused after one closed")
	}
}

func TestNewConnectionRatePerAddress(t *testing.T) {
	s := newTestServer(t, Config{Security: Security{ConnRate: 1, ConnBurst: 2}})
	admitted := 0
	for i := 0; i < 4; i++ {
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		go func() { buf := make([]byte, 512); b.Read(buf) }()
		if s.admitConn(a) != nil {
			admitted++
			s.releaseConn(a)
		}
	}
	if admitted != 2 {
		t.Fatalf("admitted %d of 4 back-to-back connections with a burst of 2", admitted)
	}
}

// TestSetPolicy: a replaced policy applies to the next request of an
// established connection: a grant removed from its identity's roles is
// refused, a token removed or moved to another identity ends the
// connection; a certificate identity that lost its roles too. Turning auth
// on or off is refused.
func TestSetPolicy(t *testing.T) {
	parse := func(y string) *auth.Policy {
		t.Helper()
		p, err := auth.Parse([]byte(y))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	v1 := parse(`
tokens: {a-token: alice, b-token: bob}
identities: {alice: [rw], bob: [rw], carol: [rw]}
roles: {rw: [{prefix: /x, perms: [read, kv-write]}]}
`)
	s := newTestServer(t, Config{Security: Security{Policy: v1, PeerSecret: "s"}})
	connAs := func(token, certID string) *conn {
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		c := newConn(s, a, nil)
		if token == "" { // a certificate identity, as authenticate sets it
			c.sec.identity, c.sec.pol = certID, s.policy()
			return c
		}
		if err := c.authenticate(&wire.Request{Op: wire.OpHello, Auth: token}); err != nil {
			t.Fatal(err)
		}
		return c
	}
	alice, bob, carol := connAs("a-token", ""), connAs("b-token", ""), connAs("", "carol")
	var got []*wire.Response
	ask := func(c *conn, op wire.Op) wire.Code {
		got = got[:0]
		if done := c.admit(&wire.Request{Op: op, Path: "/x/k"}, wire.AnswerFunc(func(r *wire.Response) { got = append(got, r) })); done != nil {
			return wire.OK
		}
		return got[0].Code
	}
	for _, c := range []*conn{alice, bob, carol} {
		if code := ask(c, wire.OpKVPut); code != wire.OK {
			t.Fatalf("%s before the reload: %v", c.sec.identity, code)
		}
	}
	if err := s.SetPolicy(parse(`
tokens: {a-token: alice, b-token: carol}
identities: {alice: [ro], bob: [ro], carol: [ro]}
roles: {ro: [{prefix: /x, perms: [read]}]}
`)); err != nil {
		t.Fatal(err)
	}
	if code := ask(alice, wire.OpKVGet); code != wire.OK {
		t.Fatalf("alice read after the reload: %v", code)
	}
	if code := ask(alice, wire.OpKVPut); code != wire.Unauthorized {
		t.Fatalf("alice write after kv-write was removed from her role: %v", code)
	}
	if alice.isClosed() {
		t.Fatal("alice's connection closed: her token is still hers")
	}
	if code := ask(bob, wire.OpKVGet); code != wire.Unauthorized || !bob.isClosed() {
		t.Fatalf("bob's token now names carol: %v, closed %v; want Unauthorized and closed", code, bob.isClosed())
	}
	if err := s.SetPolicy(parse(`
tokens: {a-token: alice}
identities: {alice: [ro]}
roles: {ro: [{prefix: /x, perms: [read]}]}
`)); err != nil {
		t.Fatal(err)
	}
	if code := ask(carol, wire.OpKVGet); code != wire.Unauthorized || !carol.isClosed() {
		t.Fatalf("carol's certificate identity lost its roles: %v, closed %v", code, carol.isClosed())
	}
	if err := s.SetPolicy(nil); err == nil {
		t.Fatal("auth turned off by a reload")
	}
	if err := newTestServer(t, Config{}).SetPolicy(v1); err == nil {
		t.Fatal("auth turned on by a reload")
	}
}
