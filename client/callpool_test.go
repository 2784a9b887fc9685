package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wardenlock/warden/wire"
)

// Calls are pooled. A call reused by a
// later request must never deliver an earlier request's answer: not a late
// answer to a request whose caller gave up, not an answer that arrives while
// the connection is being torn down. Every answer here echoes its request's
// path; slow requests are answered after their caller's deadline, and
// connections are dropped while requests are queued.
func TestPooledCallsNeverDeliverAStaleAnswer(t *testing.T) {
	var answered atomic.Int64
	var drops atomic.Int64
	srv := newFakeServer(t, func(fc *fakeConn, req *wire.Request) {
		resp := wire.Response{Value: []byte(req.Path)}
		switch {
		case strings.HasPrefix(req.Path, "/slow/"):
			go func() {
				time.Sleep(20 * time.Millisecond) // past the caller's deadline
				fc.answer(req, resp)
			}()
			return
		case strings.HasPrefix(req.Path, "/drop/") && drops.Add(1)%7 == 0:
			fc.drop() // fails the connection with calls still queued
			return
		}
		answered.Add(1)
		fc.answer(req, resp)
	})
	c := newTestClient(t, []string{srv.addr()}, WithPoolSize(2), WithBackoff(time.Millisecond, 2*time.Millisecond))
	ctx := testContext(t)
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 150 && ctx.Err() == nil; i++ {
				kind := []string{"fast", "slow", "drop"}[(w+i)%3]
				path := fmt.Sprintf("/%s/w%d-%d", kind, w, i)
				rctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
				if kind != "slow" {
					rctx, cancel = context.WithTimeout(ctx, 5*time.Second)
				}
				resp, err := c.Do(rctx, &wire.Request{Op: wire.OpKVGet, Path: path})
				cancel()
				if err != nil {
					if kind == "fast" {
						t.Errorf("%s: %v", path, err)
					}
					continue // a slow request timed out; a dropped one may fail
				}
				if got := string(resp.Value); got != path {
					t.Errorf("answer for %s carries %s: a stale answer", path, got)
				}
			}
		}()
	}
	wg.Wait()
	if answered.Load() == 0 || drops.Load() == 0 {
		t.Fatalf("the script did not run (%d answered, %d dropped)", answered.Load(), drops.Load())
	}
}

// A caller alone on an idle connection writes its frame itself; a request
// sent while another is pending goes through the writer, after it.
func TestLoneCallerWritesItsFrameItself(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var got []string
	srv := newFakeServer(t, func(fc *fakeConn, req *wire.Request) {
		mu.Lock()
		got = append(got, req.Path)
		mu.Unlock()
		go func() {
			<-release
			fc.answer(req, wire.Response{})
		}()
	})
	c := newTestClient(t, []string{srv.addr()})
	cn, err := c.pool.pick(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	for { // the connection's first request, its hold stream, is answered
		cn.mu.Lock()
		idle := len(cn.pending) == 0
		cn.mu.Unlock()
		if idle {
			break
		}
		time.Sleep(time.Millisecond)
	}
	base := cn.direct.Load()
	_, first, err := cn.send(&wire.Request{Op: wire.OpKVGet, Path: "/first"}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := cn.direct.Load() - base; n != 1 {
		t.Fatalf("%d frames written by their caller, want the lone caller's 1", n)
	}
	_, second, err := cn.send(&wire.Request{Op: wire.OpKVGet, Path: "/second"}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := cn.direct.Load() - base; n != 1 {
		t.Fatalf("%d frames written by their caller, want 1: the second was sent with the first pending", n)
	}
	close(release)
	for _, cl := range []*call{first, second} {
		if res := <-cl.done; res.err != nil {
			t.Fatal(res.err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0] != "/first" || got[1] != "/second" {
		t.Fatalf("server received %v, want [/first /second]", got)
	}
}

// Frames written by their callers and frames written by the writer share
// one socket: the requests one goroutine sends on a connection arrive in the
// order it sent them (a withdrawal must not overtake its acquire). Each
// goroutine here pipelines one to three requests and waits for their
// answers, so the connection is now and then idle (its next request is
// written directly) and now and then busy (queued).
func TestDirectAndQueuedWritesKeepOrder(t *testing.T) {
	const goroutines, rounds = 4, 300
	var mu sync.Mutex
	last := map[int]int{} // goroutine -> last index received
	var outOfOrder atomic.Int64
	srv := newFakeServer(t, func(fc *fakeConn, req *wire.Request) {
		var g, i int
		fmt.Sscanf(req.Path, "/o/g%d/%d", &g, &i)
		mu.Lock()
		if i != last[g]+1 {
			outOfOrder.Add(1)
		}
		last[g] = i
		mu.Unlock()
		fc.answer(req, wire.Response{})
	})
	c := newTestClient(t, []string{srv.addr()})
	cn, err := c.pool.pick(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			i := 0
			for round := 0; round < rounds; round++ {
				var cls []*call
				for range 1 + round%3 {
					i++
					_, cl, err := cn.send(&wire.Request{Op: wire.OpKVGet, Path: fmt.Sprintf("/o/g%d/%d", g, i)}, nil, 0)
					if err != nil {
						t.Error(err)
						return
					}
					sent.Add(1)
					cls = append(cls, cl)
				}
				for _, cl := range cls {
					if res := <-cl.done; res.err != nil {
						t.Error(res.err)
						return
					}
					cl.release()
				}
			}
		}()
	}
	wg.Wait()
	if n := outOfOrder.Load(); n != 0 {
		t.Fatalf("%d requests arrived out of their goroutine's order", n)
	}
	direct := int64(cn.direct.Load())
	if direct == 0 || direct == sent.Load() {
		t.Fatalf("%d of %d frames written by their caller: the test did not mix both ways", direct, sent.Load())
	}
	t.Logf("%d of %d frames written by their caller", direct, sent.Load())
}

// pendingCalls counts the calls registered on the client's connections.
func pendingCalls(c *Client) int {
	n := 0
	for i := range c.pool.slots {
		if cn := c.pool.slots[i].Load(); cn != nil {
			cn.mu.Lock()
			n += len(cn.pending)
			cn.mu.Unlock()
		}
	}
	return n
}

// A caller that gives up leaves no pending call behind: not a plain
// request whose context ended, nor a parked acquire that was withdrawn.
func TestCancelledCallLeavesNoWaiter(t *testing.T) {
	ls := newLockServer(t)
	ls.onCancel = func(fc *fakeConn, req *wire.Request, p parkedReq) {
		fc.answer(req, wire.Response{Code: wire.Cancelled})
		p.fc.answer(p.req, wire.Response{Code: wire.Cancelled})
	}
	inner := ls.handle
	ls.fakeServer.handle = func(fc *fakeConn, req *wire.Request) {
		if req.Op == wire.OpKVGet {
			return // never answered
		}
		inner(fc, req)
	}
	c := newTestClient(t, []string{ls.addr()}, WithPoolSize(2))
	cn, err := c.pool.pick(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(testContext(t), 20*time.Millisecond)
	_, sent, err := cn.roundTrip(ctx, &wire.Request{Op: wire.OpKVGet, Path: "/never"}, 0)
	cancel()
	if !sent || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("roundTrip: sent %v, err %v; want sent and the deadline", sent, err)
	}
	if n := pendingCalls(c); n != 0 {
		t.Fatalf("%d calls pending after their caller gave up", n)
	}

	s, err := c.NewSession(testContext(t), WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	lctx, lcancel := context.WithCancel(testContext(t))
	errc := make(chan error, 1)
	go func() { errc <- NewMutex(s, "/locks/a").Lock(lctx) }()
	ls.nextAcquire(t)
	if n := pendingCalls(c); n != 1 {
		t.Fatalf("%d calls pending while the acquire is parked, want 1", n)
	}
	lcancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock: %v, want context.Canceled", err)
	}
	eventually(t, "no call pending after the withdrawal", func() bool { return pendingCalls(c) == 0 })
}

// A request unanswered within the request timeout fails that attempt and is
// sent again; its late answer is delivered to no one. The connection's one
// timeout timer must re-arm after every expiry: here each request's first
// attempt is never answered in time, so a request waits for the timer at
// least once, and one that missed it would wait for the test's context.
func TestRequestTimeoutRetriesAndDropsLateAnswers(t *testing.T) {
	var seen sync.Map // path -> attempts so far
	srv := newFakeServer(t, func(fc *fakeConn, req *wire.Request) {
		n, _ := seen.LoadOrStore(req.Path, new(atomic.Int64))
		resp := wire.Response{Value: []byte(req.Path)}
		if n.(*atomic.Int64).Add(1) == 1 {
			go func() {
				time.Sleep(60 * time.Millisecond) // long past the request timeout
				fc.answer(req, resp)
			}()
			return
		}
		fc.answer(req, resp)
	})
	c := newTestClient(t, []string{srv.addr()}, WithPoolSize(1), WithRequestTimeout(20*time.Millisecond),
		WithBackoff(time.Millisecond, 2*time.Millisecond))
	ctx := testContext(t)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10 && ctx.Err() == nil; i++ {
				path := fmt.Sprintf("/late/w%d-%d", w, i)
				resp, err := c.Do(ctx, &wire.Request{Op: wire.OpKVGet, Path: path})
				if err != nil {
					t.Errorf("%s: %v", path, err)
					return
				}
				if string(resp.Value) != path {
					t.Errorf("%s: got the answer to %s", path, resp.Value)
				}
			}
		}()
	}
	wg.Wait()
}

// Calls of different timeouts pending on one connection each time out,
// the later one after the connection's timer fired for the earlier one: the
// timer re-arms for the earliest deadline left, with no other request to
// arm it.
func TestEveryPendingCallTimesOut(t *testing.T) {
	srv := newFakeServer(t, func(*fakeConn, *wire.Request) {}) // never answers
	c := newTestClient(t, []string{srv.addr()}, WithPoolSize(1))
	ctx := testContext(t)
	cn, err := c.pool.pick(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, timeout := range []time.Duration{5 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, sent, err := cn.roundTrip(ctx, &wire.Request{Op: wire.OpKVGet, Path: "/never"}, timeout)
			if !sent || !errors.Is(err, errAttemptTimeout) {
				t.Errorf("timeout %v: sent %v, err %v; want the attempt timed out", timeout, sent, err)
			}
		}()
	}
	wg.Wait()
}

// Answers read inside the client (a Mutex's grant, a release) go back to a
// pool: none may be reused while its content is still to be read. Each
// grant here carries a token made from its request's path and Seq, so a
// Mutex that read a recycled answer would see another request's token.
func TestRecycledAnswersKeepTheirTokens(t *testing.T) {
	tokenOf := func(req *wire.Request) uint64 {
		var w, i uint64
		fmt.Sscanf(req.Path, "/r/w%d-%d", &w, &i)
		return w<<48 | i<<32 | req.Seq
	}
	var mu sync.Mutex
	issued := map[string]uint64{} // path -> last token granted
	srv := newFakeServer(t, func(fc *fakeConn, req *wire.Request) {
		resp := wire.Response{}
		if req.Op == wire.OpAcquire {
			resp.Token = tokenOf(req)
			mu.Lock()
			issued[req.Path] = resp.Token
			mu.Unlock()
		}
		fc.answer(req, resp)
	})
	c := newTestClient(t, []string{srv.addr()}, WithPoolSize(2))
	ctx := testContext(t)
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := c.NewSession(ctx, WithTTL(5*time.Second))
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Close(ctx)
			for i := 0; i < 100 && ctx.Err() == nil; i++ {
				path := fmt.Sprintf("/r/w%d-%d", w, i%4)
				m := NewMutex(s, path)
				if err := m.Lock(ctx); err != nil {
					t.Errorf("%s: %v", path, err)
					return
				}
				mu.Lock()
				want := issued[path]
				mu.Unlock()
				if got := m.Token(); got != want {
					t.Errorf("%s: token %x, the server granted %x", path, got, want)
				}
				if err := m.Unlock(ctx); err != nil {
					t.Errorf("%s: unlock: %v", path, err)
				}
			}
		}()
	}
	wg.Wait()
}
