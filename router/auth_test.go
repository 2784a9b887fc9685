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
