package client

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/wardenlock/warden/wire"
)

func ev(rev uint64, kind wire.EventKind) wire.Event {
	return wire.Event{Rev: rev, Kind: kind, Cause: wire.CauseUser, Path: "/kv/a", Shard: 3}
}

func push(fc *fakeConn, stream uint64, evs ...wire.Event) {
	fc.reply(&wire.Response{Stream: stream, Events: evs})
}

func recvEvents(t *testing.T, ch <-chan WatchResponse, n int) []uint64 {
	t.Helper()
	var revs []uint64
	for len(revs) < n {
		select {
		case wr, ok := <-ch:
			if !ok {
				t.Fatalf("watch closed after %v", revs)
			}
			if wr.Err != nil {
				t.Fatalf("watch error %v after %v", wr.Err, revs)
			}
			for _, e := range wr.Events {
				revs = append(revs, e.Rev)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("timed out after events %v", revs)
		}
	}
	return revs
}

// watchServer is a fake server that answers every request but watches
// with an empty OK, and passes each watch request to handle with its
// number (from 1); the returned func lists the watch requests seen.
func watchServer(t *testing.T, handle func(fc *fakeConn, req *wire.Request, n int)) (*fakeServer, func() []wire.Request) {
	var (
		mu      sync.Mutex
		watches []wire.Request
	)
	srv := newFakeServer(t, func(fc *fakeConn, req *wire.Request) {
		if req.Op != wire.OpWatch {
			fc.answer(req, wire.Response{})
			return
		}
		mu.Lock()
		watches = append(watches, *req)
		n := len(watches)
		mu.Unlock()
		handle(fc, req, n)
	})
	return srv, func() []wire.Request {
		mu.Lock()
		defer mu.Unlock()
		return append([]wire.Request(nil), watches...)
	}
}

// A prefix watch that loses its connection resubscribes from its position
// (per shard, the last revision delivered), and a replayed event is not
// delivered twice.
func TestWatchResumesAfterReconnect(t *testing.T) {
	srv, watchReqs := watchServer(t, func(fc *fakeConn, req *wire.Request, n int) {
		fc.answer(req, wire.Response{Stream: req.ID, Rev: 10})
		switch n {
		case 1:
			push(fc, req.ID, ev(11, wire.EvKVPut), ev(12, wire.EvKVPut))
			go func() { // give the client time to read the push, then break the connection
				time.Sleep(20 * time.Millisecond)
				fc.drop()
			}()
		case 2:
			push(fc, req.ID, ev(12, wire.EvKVPut), ev(13, wire.EvKVDelete)) // 12 is a replay
			push(fc, req.ID, ev(14, wire.EvKVPut))
		}
	})
	c := newTestClient(t, []string{srv.addr()})
	ch := c.Watch(testContext(t), "/kv", WithPrefix())

	got := recvEvents(t, ch, 4)
	if want := []uint64{11, 12, 13, 14}; !equalRevs(got, want) {
		t.Fatalf("revisions %v, want %v", got, want)
	}
	watches := watchReqs()
	if len(watches) != 2 || watches[0].Rev != 0 || len(watches[0].Position) != 0 || !watches[0].Has(wire.FlagPrefix) ||
		watches[1].Rev != 13 || Position(watches[1].Position).String() != "3:12" || !watches[1].Has(wire.FlagPrefix) {
		t.Fatalf("watch requests %+v, want from now, then after position 3:12 (and from 13, for a server without positions), both prefix", watches)
	}
}

// A stream dropped before any event resumes right after the revision the
// first answer reported, so events in between are not lost.
func TestWatchResumesFromFirstAnswerRev(t *testing.T) {
	var (
		mu   sync.Mutex
		revs []uint64
	)
	srv := newFakeServer(t, func(fc *fakeConn, req *wire.Request) {
		if req.Op != wire.OpWatch {
			fc.answer(req, wire.Response{})
			return
		}
		mu.Lock()
		revs = append(revs, req.Rev)
		n := len(revs)
		mu.Unlock()
		fc.answer(req, wire.Response{Stream: req.ID, Rev: 41})
		if n == 1 {
			go fc.drop()
			return
		}
		push(fc, req.ID, ev(42, wire.EvAcquired))
	})
	c := newTestClient(t, []string{srv.addr()})
	if got := recvEvents(t, c.Watch(testContext(t), "/kv/a"), 1); got[0] != 42 {
		t.Fatalf("got %v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(revs) != 2 || revs[1] != 42 {
		t.Fatalf("watch start revisions %v, want [0 42]", revs)
	}
}

func TestWatchCompactedEndsStream(t *testing.T) {
	srv := newFakeServer(t, func(fc *fakeConn, req *wire.Request) {
		if req.Op == wire.OpWatch && req.Rev < 100 {
			fc.answer(req, wire.Response{Code: wire.Compacted, Msg: "oldest retained revision is 100"})
			return
		}
		fc.answer(req, wire.Response{Stream: req.ID})
	})
	c := newTestClient(t, []string{srv.addr()})
	ch := c.Watch(testContext(t), "/kv/a", WithRev(5))
	wr := <-ch
	if !errors.Is(wr.Err, ErrCompacted) {
		t.Fatalf("first response %+v, want ErrCompacted", wr)
	}
	if _, ok := <-ch; ok {
		t.Error("channel not closed after the error")
	}
}

// A push with an error code after events ends the watch with that error.
func TestWatchErrorPushEndsStream(t *testing.T) {
	srv := newFakeServer(t, func(fc *fakeConn, req *wire.Request) {
		fc.answer(req, wire.Response{Stream: req.ID, Rev: 1})
		push(fc, req.ID, ev(2, wire.EvKVPut))
		fc.reply(&wire.Response{Stream: req.ID, Code: wire.Compacted})
	})
	c := newTestClient(t, []string{srv.addr()})
	ch := c.Watch(testContext(t), "/kv/a")
	if got := recvEvents(t, ch, 1); got[0] != 2 {
		t.Fatalf("got %v", got)
	}
	if wr := <-ch; !errors.Is(wr.Err, ErrCompacted) {
		t.Fatalf("got %+v, want ErrCompacted", wr)
	}
}

// Cancelling the watch's context closes the channel and sends OpUnwatch.
func TestWatchCancelUnwatches(t *testing.T) {
	srv := newFakeServer(t, func(fc *fakeConn, req *wire.Request) {
		fc.answer(req, wire.Response{Stream: req.ID, Rev: 1})
	})
	c := newTestClient(t, []string{srv.addr()})
	ctx, cancel := contextWithCancel(t)
	ch := c.Watch(ctx, "/kv/a")
	eventually(t, "the subscription", func() bool { return len(srv.requests(wire.OpWatch)) == 1 })
	cancel()
	for range ch {
	}
	eventually(t, "unwatch", func() bool { return len(srv.requests(wire.OpUnwatch)) == 1 })
	w, u := srv.requests(wire.OpWatch)[0], srv.requests(wire.OpUnwatch)[0]
	if u.Stream != w.ID {
		t.Errorf("unwatch stream %d, want the watch request id %d", u.Stream, w.ID)
	}
}

func TestObserveReportsLeaderChanges(t *testing.T) {
	var (
		mu     sync.Mutex
		leader = wire.Response{Value: []byte("node-1"), Token: 5, Owner: "a"}
		stream *fakeConn
		sid    uint64
	)
	srv := newFakeServer(t, func(fc *fakeConn, req *wire.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch req.Op {
		case wire.OpLeader:
			fc.answer(req, leader)
		case wire.OpWatch:
			stream, sid = fc, req.ID
			fc.answer(req, wire.Response{Stream: req.ID, Rev: 1})
		default:
			fc.answer(req, wire.Response{})
		}
	})
	c := newTestClient(t, []string{srv.addr()})
	ch := c.Observe(testContext(t), "/elect/x")
	if li := <-ch; string(li.Value) != "node-1" || li.Token != 5 {
		t.Fatalf("first leader %+v", li)
	}
	eventually(t, "the watch", func() bool { mu.Lock(); defer mu.Unlock(); return stream != nil })
	mu.Lock()
	leader = wire.Response{Value: []byte("node-2"), Token: 6, Owner: "b"}
	push(stream, sid, wire.Event{Rev: 2, Kind: wire.EvLeader, Path: "/elect/x", Token: 6})
	mu.Unlock()
	if li := <-ch; string(li.Value) != "node-2" || li.Token != 6 || li.Owner != "b" {
		t.Fatalf("second leader %+v", li)
	}
}

func equalRevs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The server ends a stream whose consumer fell behind with TooMany; the
// client resumes it by revision instead of reporting an error.
func TestWatchResumesAfterTooMany(t *testing.T) {
	var (
		mu   sync.Mutex
		revs []uint64
	)
	srv := newFakeServer(t, func(fc *fakeConn, req *wire.Request) {
		if req.Op != wire.OpWatch {
			fc.answer(req, wire.Response{})
			return
		}
		mu.Lock()
		revs = append(revs, req.Rev)
		n := len(revs)
		mu.Unlock()
		fc.answer(req, wire.Response{Stream: req.ID, Rev: 4})
		if n == 1 {
			push(fc, req.ID, ev(5, wire.EvKVPut))
			fc.reply(&wire.Response{Stream: req.ID, Code: wire.TooMany, Msg: "consumer too slow"})
			return
		}
		push(fc, req.ID, ev(6, wire.EvKVPut))
	})
	c := newTestClient(t, []string{srv.addr()})
	if got := recvEvents(t, c.Watch(testContext(t), "/kv/a"), 2); !equalRevs(got, []uint64{5, 6}) {
		t.Fatalf("got %v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if !equalRevs(revs, []uint64{0, 6}) {
		t.Fatalf("watch start revisions %v, want [0 6]", revs)
	}
}

// A prefix watch's position takes the first answer's start position once
// the events pushed before it (a replay) are delivered; it resumes after
// every shard's entry, and each response carries the position.
func TestWatchPositionFromFirstAnswer(t *testing.T) {
	srv, watchReqs := watchServer(t, func(fc *fakeConn, req *wire.Request, n int) {
		if n == 1 {
			replay := ev(5, wire.EvKVPut)
			replay.Shard = 2
			push(fc, req.ID, replay)
			fc.answer(req, wire.Response{Stream: req.ID, Position: []wire.ShardRev{{Shard: 2, Rev: 5}, {Shard: 3, Rev: 40}}})
			push(fc, req.ID, ev(41, wire.EvKVPut))
			go func() {
				time.Sleep(20 * time.Millisecond)
				fc.drop()
			}()
			return
		}
		fc.answer(req, wire.Response{Stream: req.ID, Position: req.Position})
		push(fc, req.ID, ev(42, wire.EvKVDelete))
	})
	c := newTestClient(t, []string{srv.addr()})
	ch := c.Watch(testContext(t), "/kv", WithPrefix(), WithWatchPosition(Position{{Shard: 2, Rev: 4}}))
	var last Position
	var revs []uint64
	for len(revs) < 3 {
		r, ok := <-ch
		if !ok || r.Err != nil {
			t.Fatalf("watch ended: %v", r.Err)
		}
		for _, e := range r.Events {
			revs = append(revs, e.Rev)
		}
		last = r.Position
	}
	if !equalRevs(revs, []uint64{5, 41, 42}) || last.String() != "2:5,3:42" {
		t.Fatalf("revisions %v, position %v; want [5 41 42] at 2:5,3:42", revs, last)
	}
	watches := watchReqs()
	if len(watches) != 2 || Position(watches[0].Position).String() != "2:4" || Position(watches[1].Position).String() != "2:5,3:41" {
		t.Fatalf("watch requests %+v, want from 2:4, then from 2:5,3:41", watches)
	}
}

func TestParsePosition(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		bad      bool
	}{
		{in: "", want: ""},
		{in: "3:9,1:42", want: "1:42,3:9"},
		{in: "1:18446744073709551615", want: "1:18446744073709551615"},
		{in: "1:2,1:3", bad: true},
		{in: "0:5", bad: true},
		{in: "1", bad: true},
		{in: "1:-2", bad: true},
		{in: "1:18446744073709551616", bad: true},
		{in: "a:b", bad: true},
		{in: "1:2,", bad: true},
	} {
		p, err := ParsePosition(tc.in)
		if tc.bad != (err != nil) || !tc.bad && p.String() != tc.want {
			t.Errorf("ParsePosition(%q) = %v, %v; want %q (error: %v)", tc.in, p, err, tc.want, tc.bad)
		}
	}
}

// The position after any one event of a batch: later events of a shard
// set its entry back to just before the first of them.
func TestPositionAfter(t *testing.T) {
	e := func(shard, rev uint64) Event { return Event{Shard: shard, Rev: rev} }
	wr := WatchResponse{Events: []Event{e(2, 10), e(3, 7), e(2, 14)},
		Position: Position{{Shard: 2, Rev: 14}, {Shard: 3, Rev: 7}, {Shard: 4, Rev: 99}}}
	for i, want := range []string{"2:13,3:6,4:99", "2:13,3:7,4:99", "2:14,3:7,4:99"} {
		if got := wr.PositionAfter(i).String(); got != want {
			t.Errorf("after event %d: %s, want %s", i, got, want)
		}
	}
	if wr.Position.String() != "2:14,3:7,4:99" {
		t.Fatalf("PositionAfter changed the batch's position: %s", wr.Position)
	}
}

// A position is a prefix watch's; on a single path it is refused at once.
func TestWatchPositionNeedsPrefix(t *testing.T) {
	srv := newFakeServer(t, func(fc *fakeConn, req *wire.Request) { fc.answer(req, wire.Response{}) })
	c := newTestClient(t, []string{srv.addr()})
	wr := <-c.Watch(testContext(t), "/kv/a", WithWatchPosition(Position{{Shard: 2, Rev: 1}}))
	if !errors.Is(wr.Err, ErrInvalidArgument) {
		t.Fatalf("got %+v, want ErrInvalidArgument", wr)
	}
}
