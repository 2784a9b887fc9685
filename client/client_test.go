package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wardenlock/warden/wire"
)

// Many concurrent requests share one connection and are answered in reverse
// order; each caller must get its own answer.
func TestPipeliningOutOfOrderAnswers(t *testing.T) {
	const n = 64
	var (
		mu     sync.Mutex
		parked []*wire.Request
		conns  = map[*fakeConn]bool{}
	)
	srv := newFakeServer(t, func(fc *fakeConn, req *wire.Request) {
		mu.Lock()
		defer mu.Unlock()
		conns[fc] = true
		parked = append(parked, req)
		if len(parked) < n {
			return
		}
		for i := len(parked) - 1; i >= 0; i-- { // newest first
			fc.answer(parked[i], wire.Response{Value: []byte(parked[i].Path), Version: 1})
		}
	})
	c := newTestClient(t, []string{srv.addr()})
	ctx := testContext(t)

	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := fmt.Sprintf("/kv/k%d", i)
			kv, err := c.Get(ctx, path)
			if err == nil && string(kv.Value) != path {
				err = fmt.Errorf("Get(%s) got the answer for %s", path, kv.Value)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if len(conns) != 1 || srv.connCount() != 1 {
		t.Errorf("requests used %d connections (server saw %d), want 1", len(conns), srv.connCount())
	}
}

// A mutating request whose connection drops before the answer is resent on
// a new connection with the same client id and sequence number.
func TestRetryAfterDropReusesSeq(t *testing.T) {
	var dropped sync.Once
	srv := newFakeServer(t, func(fc *fakeConn, req *wire.Request) {
		if req.Op != wire.OpKVPut {
			fc.answer(req, wire.Response{})
			return
		}
		first := false
		dropped.Do(func() { first = true })
		if first {
			fc.drop()
			return
		}
		fc.answer(req, wire.Response{Version: 7})
	})
	c := newTestClient(t, []string{srv.addr()})

	v, err := c.Put(testContext(t), "/kv/a", []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if v != 7 {
		t.Errorf("version = %d, want 7", v)
	}
	puts := srv.requests(wire.OpKVPut)
	if len(puts) != 2 {
		t.Fatalf("server saw %d puts, want 2", len(puts))
	}
	if puts[0].Seq == 0 || puts[0].Seq != puts[1].Seq || puts[0].Client != puts[1].Client || puts[0].Client != c.ID() {
		t.Errorf("retry changed identity: first (client %d, seq %d), retry (client %d, seq %d)",
			puts[0].Client, puts[0].Seq, puts[1].Client, puts[1].Seq)
	}
	if srv.connCount() != 2 {
		t.Errorf("server saw %d connections, want 2 (a reconnect)", srv.connCount())
	}
}

// When the first endpoint goes away the request is failed over to the
// second, which gets the same client identity in the handshake.
func TestFailoverToSecondEndpoint(t *testing.T) {
	var a *fakeServer
	a = newFakeServer(t, func(fc *fakeConn, req *wire.Request) {
		go a.stop() // endpoint A dies with the request unanswered
	})
	b := newFakeServer(t, func(fc *fakeConn, req *wire.Request) {
		fc.answer(req, wire.Response{Value: []byte("from b")})
	})
	c := newTestClient(t, []string{a.addr(), b.addr()})

	kv, err := c.Get(testContext(t), "/kv/a")
	if err != nil {
		t.Fatal(err)
	}
	if string(kv.Value) != "from b" {
		t.Errorf("value = %q, want the answer of endpoint B", kv.Value)
	}
	hellos := b.requests(wire.OpHello)
	if len(hellos) == 0 || hellos[0].Client != c.ID() || hellos[0].Rev != wire.ProtocolVersion {
		t.Errorf("handshake on B = %+v, want client %d, version %d", hellos, c.ID(), wire.ProtocolVersion)
	}
}

// Retryable codes are retried unchanged; decisions are returned as typed
// errors.
func TestRetryableCodesAndTypedErrors(t *testing.T) {
	tests := []struct {
		name     string
		answers  []wire.Code
		wantErr  error
		attempts int
	}{
		{"not leader then ok", []wire.Code{wire.NotLeader, wire.OK}, nil, 2},
		{"unavailable twice then ok", []wire.Code{wire.Unavailable, wire.RangeMoving, wire.OK}, nil, 3},
		{"conflict is final", []wire.Code{wire.Conflict}, ErrConflict, 1},
		{"version mismatch is final", []wire.Code{wire.VersionMismatch}, ErrVersionMismatch, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			n := 0
			srv := newFakeServer(t, func(fc *fakeConn, req *wire.Request) {
				mu.Lock()
				code := tc.answers[min(n, len(tc.answers)-1)]
				n++
				mu.Unlock()
				fc.answer(req, wire.Response{Code: code, Msg: "scripted", Version: 3})
			})
			c := newTestClient(t, []string{srv.addr()})
			_, err := c.CAS(testContext(t), "/kv/a", 2, []byte("v"))
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil && IsRetryable(err) {
				t.Errorf("IsRetryable(%v) = true for a decision", err)
			}
			var we *wire.Error
			if err != nil && (!errors.As(err, &we) || we.Detail != "scripted") {
				t.Errorf("errors.As(%v) did not expose the detail", err)
			}
			puts := srv.requests(wire.OpKVPut)
			if len(puts) != tc.attempts {
				t.Fatalf("server saw %d attempts, want %d", len(puts), tc.attempts)
			}
			for _, p := range puts {
				if p.Seq != puts[0].Seq || !p.Has(wire.FlagHasExpect) || p.Version != 2 {
					t.Errorf("attempt %+v differs from the first %+v", p, puts[0])
				}
			}
		})
	}
}

// A context that ends while a write is unanswered yields an error matching
// both ErrAmbiguous and the context error.
func TestUnansweredWriteIsAmbiguous(t *testing.T) {
	srv := newFakeServer(t, func(fc *fakeConn, req *wire.Request) {}) // never answers
	c := newTestClient(t, []string{srv.addr()})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c.Put(ctx, "/kv/a", []byte("x"))
	if !errors.Is(err, ErrAmbiguous) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrAmbiguous and DeadlineExceeded", err)
	}
	if IsRetryable(err) {
		t.Errorf("an ambiguous outcome must not be IsRetryable")
	}
}

func TestHandshakeRefused(t *testing.T) {
	srv := newFakeServer(t, okHandler)
	srv.hello = func(req *wire.Request) *wire.Response {
		if req.Auth != "secret" {
			return &wire.Response{ID: req.ID, Code: wire.Unauthorized, Msg: "bad credentials"}
		}
		return &wire.Response{ID: req.ID}
	}
	ctx := testContext(t)
	if _, err := New(ctx, []string{srv.addr()}, WithCredentials("wrong")); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("New with wrong credentials: err = %v, want ErrUnauthorized", err)
	}
	c, err := New(ctx, []string{srv.addr()}, WithCredentials("secret"))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := c.Get(ctx, "/a"); !errors.Is(err, ErrClientClosed) {
		t.Errorf("Get after Close: err = %v, want ErrClientClosed", err)
	}
}

func TestDoAssignsIdentity(t *testing.T) {
	srv := newFakeServer(t, okHandler)
	c := newTestClient(t, []string{srv.addr()})
	ctx := testContext(t)
	if _, err := c.Do(ctx, &wire.Request{Op: wire.OpRelease, Path: "/a", Token: 5}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do(ctx, &wire.Request{Op: wire.OpKVGet, Path: "/a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do(ctx, &wire.Request{Op: wire.OpWatch, Path: "/a"}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Do(OpWatch): err = %v, want ErrInvalidArgument", err)
	}
	rel, get := srv.requests(wire.OpRelease), srv.requests(wire.OpKVGet)
	if len(rel) != 1 || rel[0].Client != c.ID() || rel[0].Seq == 0 || rel[0].AckSeq > rel[0].Seq {
		t.Errorf("release = %+v: want client id, a seq, AckSeq <= Seq", rel)
	}
	if len(get) != 1 || get[0].Seq != 0 {
		t.Errorf("read = %+v: want no seq", get)
	}
}

func TestSeqTrackerAckFloor(t *testing.T) {
	tests := []struct {
		name    string
		begin   int
		end     []uint64
		wantAck uint64
	}{
		{"none outstanding", 0, nil, 1},
		{"all open", 3, nil, 1},
		{"first finished", 3, []uint64{1}, 2},
		{"gap holds the floor", 3, []uint64{2, 3}, 1},
		{"gap filled", 3, []uint64{2, 3, 1}, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := newSeqTracker()
			for range tc.begin {
				tr.begin()
			}
			for _, s := range tc.end {
				tr.end(s)
			}
			if got := tr.ack(); got != tc.wantAck {
				t.Errorf("ack = %d, want %d", got, tc.wantAck)
			}
		})
	}
}

// An oversized request is refused locally: the server's TooLarge answer
// could not be matched to it.
func TestOversizedRequestRefusedLocally(t *testing.T) {
	srv := newFakeServer(t, okHandler)
	c := newTestClient(t, []string{srv.addr()}, WithMaxFrame(1024))
	_, err := c.Put(testContext(t), "/kv/big", make([]byte, 2048))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	if n := len(srv.requests(wire.OpKVPut)); n != 0 {
		t.Errorf("server received %d oversized puts", n)
	}
}

// A TooMany answer with a TTL is a rate limit that says when to come back:
// the client waits at least that long and resends the same request. Without
// a TTL (a lock or session limit) TooMany is a decision and is returned.
func TestTooManyHonoursRetryHint(t *testing.T) {
	tests := []struct {
		name     string
		ttl      int64 // ms hint on the first answer
		attempts int
		wantErr  error
	}{
		{"rate limited with a hint is retried after it", 60, 2, nil},
		{"limit without a hint is final", 0, 1, ErrTooMany},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var seen []time.Time
			srv := newFakeServer(t, func(fc *fakeConn, req *wire.Request) {
				mu.Lock()
				seen = append(seen, time.Now())
				first := len(seen) == 1
				mu.Unlock()
				if first {
					fc.answer(req, wire.Response{Code: wire.TooMany, TTL: tc.ttl, Msg: "slow down"})
					return
				}
				fc.answer(req, wire.Response{Version: 1})
			})
			c := newTestClient(t, []string{srv.addr()})
			_, err := c.Put(testContext(t), "/kv/a", []byte("v"))
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			puts := srv.requests(wire.OpKVPut)
			if len(puts) != tc.attempts {
				t.Fatalf("server saw %d attempts, want %d", len(puts), tc.attempts)
			}
			if tc.attempts == 2 {
				if puts[1].Seq != puts[0].Seq {
					t.Errorf("retry changed seq %d → %d", puts[0].Seq, puts[1].Seq)
				}
				mu.Lock()
				gap := seen[1].Sub(seen[0])
				mu.Unlock()
				if gap < time.Duration(tc.ttl)*time.Millisecond {
					t.Errorf("retried after %v, before the %d ms hint", gap, tc.ttl)
				}
			}
		})
	}
}

// A hint that ends after the caller's deadline is not slept through: the
// caller gets the TooMany error at once.
func TestTooManyHintBeyondDeadline(t *testing.T) {
	srv := newFakeServer(t, func(fc *fakeConn, req *wire.Request) {
		fc.answer(req, wire.Response{Code: wire.TooMany, TTL: 60_000, Msg: "slow down"})
	})
	c := newTestClient(t, []string{srv.addr()})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.Put(ctx, "/kv/a", []byte("v"))
	if !errors.Is(err, ErrTooMany) {
		t.Fatalf("err = %v, want ErrTooMany", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("the client slept until the deadline instead of returning the hint")
	}
	if n := len(srv.requests(wire.OpKVPut)); n != 1 {
		t.Fatalf("server saw %d attempts, want 1", n)
	}
}
