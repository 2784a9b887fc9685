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

// Calls (and the request copy inside each) are pooled. A call reused by a
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

// A pooled call goes back to the pool only when both its waiter and the
// writer have let go of it, in either order.
func TestCallReturnsToPoolOnlyWhenBothLetGo(t *testing.T) {
	for _, order := range []string{"waiter first", "writer first"} {
		t.Run(order, func(t *testing.T) {
			cl := newCall(&wire.Request{Op: wire.OpAcquire, Path: "/a"})
			if order == "waiter first" {
				cl.release()
			} else {
				cl.written()
			}
			if cl.refs.Load() != 1 || cl.req.Path != "/a" {
				t.Fatalf("after one let go: refs %d, path %q; want 1 and the request intact", cl.refs.Load(), cl.req.Path)
			}
			if order == "waiter first" {
				cl.written()
			} else {
				cl.release()
			}
			if cl.refs.Load() != 0 || cl.req.Path != "" {
				t.Fatalf("after both let go: refs %d, path %q; want 0 and the request cleared", cl.refs.Load(), cl.req.Path)
			}
		})
	}
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
