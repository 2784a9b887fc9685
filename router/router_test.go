package router

import (
	"testing"
	"unsafe"

	"github.com/wardenlock/warden/wire"
)

func TestAckTrackerFloorIsLowestUnanswered(t *testing.T) {
	var a ackTracker
	s1, s2, s3 := a.start(), a.start(), a.start()
	if a.floor() != s1 {
		t.Fatalf("floor %d, want %d", a.floor(), s1)
	}
	a.finish(s2)
	if a.floor() != s1 {
		t.Fatal("floor moved past an unanswered request")
	}
	a.finish(s1)
	if a.floor() != s3 {
		t.Fatalf("floor %d, want %d", a.floor(), s3)
	}
	a.finish(s3)
	if a.floor() != s3+1 {
		t.Fatalf("floor %d, want %d", a.floor(), s3+1)
	}
}

func TestFanInMergesAndReportsFirstError(t *testing.T) {
	var got *wire.Response
	f := &fanIn{n: 3, out: &wire.Response{ID: 4}, done: func(r *wire.Response) { got = r }}
	f.add(&wire.Response{Leases: []uint64{1}})
	f.add(&wire.Response{Code: wire.Unavailable, Msg: "shard 3 has no leader"})
	if got != nil {
		t.Fatal("answered before every shard did")
	}
	f.add(&wire.Response{Leases: []uint64{2}})
	if got == nil || got.Code != wire.Unavailable || len(got.Leases) != 2 || got.ID != 4 {
		t.Fatalf("merged answer %+v", got)
	}
}

func TestRetryableOnlyWhenSafe(t *testing.T) {
	deduped := &wire.Request{Op: wire.OpAcquire, Client: 1, Seq: 2}
	bare := &wire.Request{Op: wire.OpAcquire}
	cases := []struct {
		name string
		req  *wire.Request
		code wire.Code
		want bool
	}{
		{"not leader", bare, wire.NotLeader, true},
		{"wrong shard", bare, wire.WrongShard, true},
		{"ambiguous with dedup ids", deduped, wire.Ambiguous, true},
		{"ambiguous without ids", bare, wire.Ambiguous, false},
		{"conflict is a decision", deduped, wire.Conflict, false},
	}
	for _, tc := range cases {
		if got := retryable(tc.req, &wire.Response{Code: tc.code}); got != tc.want {
			t.Errorf("%s: retryable=%v", tc.name, got)
		}
	}
}

// A merged keepalive's answer is split: each caller hears the shared code
// and only its own gone leases.
func TestSplitKeepAliveAnswers(t *testing.T) {
	answered := map[uint64]*wire.Response{}
	calls := []keepAliveCall{
		{id: 1, leases: []uint64{10, 11}, done: func(r *wire.Response) { answered[1] = r }},
		{id: 2, leases: []uint64{12}, done: func(r *wire.Response) { answered[2] = r }},
	}
	splitKeepAlive(calls, &wire.Response{Leases: []uint64{11}})
	if r := answered[1]; r == nil || len(r.Leases) != 1 || r.Leases[0] != 11 || r.ID != 1 || r.Code != wire.OK {
		t.Fatalf("caller 1 got %+v", r)
	}
	if r := answered[2]; r == nil || len(r.Leases) != 0 || r.ID != 2 {
		t.Fatalf("caller 2 got %+v", r)
	}
	splitKeepAlive(calls, &wire.Response{Code: wire.Unavailable, Msg: "shard 3 has no leader"})
	if answered[1].Code != wire.Unavailable || answered[2].Code != wire.Unavailable {
		t.Fatal("a failed fan-out must fail every merged caller")
	}
}

// The call's answer undoes the request's bookkeeping on its connection (the
// parked wait, the in-flight slot, the router-assigned sequence number) and
// frames the answer under the request's id.
func TestCallAnswerFinishesTheRequest(t *testing.T) {
	c := &conn{s: &Server{}, sem: make(chan struct{}, 1), wake: make(chan struct{}, 1), client: 77,
		parked: map[clientSeq]parkedWait{}}
	cl := &call{c: c, req: wire.Request{ID: 5, Op: wire.OpAcquire, Path: "/a/b", Wait: wire.WaitForever}}
	c.assignSeq(cl)
	if !cl.try.acked || cl.req.Client != 77 || cl.req.Seq != 1 {
		t.Fatalf("assignSeq: acked %v, (client, seq) = (%d, %d); want a router-assigned (77, 1)", cl.try.acked, cl.req.Client, cl.req.Seq)
	}
	c.parked[clientSeq{77, 1}] = parkedWait{path: "/a/b"}
	cl.try.parked = true
	c.sem <- struct{}{}
	cl.Answer(&wire.Response{Code: wire.OK, Token: 3})
	if len(c.parked) != 0 || len(c.sem) != 0 || c.acks.floor() != 2 {
		t.Errorf("after the answer: %d parked, %d slots taken, ack floor %d; want 0, 0, 2", len(c.parked), len(c.sem), c.acks.floor())
	}
	var got wire.Response
	if len(c.out) < wire.FrameHeaderSize || wire.DecodeResponse(c.out[wire.FrameHeaderSize:], &got) != nil || got.ID != 5 || got.Token != 3 {
		t.Errorf("framed answer %+v, want id 5 with token 3", got)
	}
}

// A call is made for every request read: within 512 bytes the allocator
// serves it without a per-object header, the cheaper path.
func TestCallFitsHeaderlessAllocation(t *testing.T) {
	if n := unsafe.Sizeof(call{}); n > 512 {
		t.Errorf("call is %d bytes, want at most 512", n)
	}
}
