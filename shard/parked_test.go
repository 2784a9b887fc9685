package shard

import (
	"errors"
	"sync"
	"testing"

	"github.com/wardenlock/warden/wire"
)

// A blocking acquire's proposal answers to its parkedReq: "queued" keeps it
// parked, and any other result goes to whichever copy of the request is
// parked under its (client, seq) now, with that copy's id.
func TestParkedReqAnswer(t *testing.T) {
	s := &Shard{parked: newParkedSet()}
	k := clientSeq{1, 2}
	var first, second []*wire.Response
	p1 := &parkedReq{s: s, key: k, id: 10, to: wire.AnswerFunc(func(r *wire.Response) { first = append(first, r) })}
	s.parked.add(k, p1)
	p1.Answer(&wire.Response{Code: wire.Queued})
	if len(first) != 0 || !s.parked.has(k) {
		t.Fatalf("queued: answers %+v, parked %v; want none and still parked", first, s.parked.has(k))
	}
	p2 := &parkedReq{s: s, key: k, id: 11, to: wire.AnswerFunc(func(r *wire.Response) { second = append(second, r) })}
	s.parked.add(k, p2) // a retry of the same request supersedes the first copy
	p1.Answer(&wire.Response{Code: wire.OK, Token: 9})
	if len(first) != 1 || first[0].Code != wire.Superseded {
		t.Errorf("first copy got %+v, want one Superseded", first)
	}
	if len(second) != 1 || second[0].Token != 9 || second[0].ID != 11 || s.parked.has(k) {
		t.Errorf("second copy got %+v (parked %v), want the grant with id 11", second, s.parked.has(k))
	}
}

// The proposer hands entries to awaiters, at most max of them: an entry
// whose proposal failed is answered with its error, every entry exactly
// once, and close waits for them.
func TestAwaitersAnswerEveryEntry(t *testing.T) {
	p := &proposer{s: &Shard{}, stop: make(chan struct{}), awaiters: awaiters{work: make(chan *inflight), max: 2}}
	var mu sync.Mutex
	got := map[uint64]int{}
	boom := errors.New("boom")
	for i := uint64(1); i <= 20; i++ {
		f := newInflight([]proposal{{req: &wire.Request{ID: i}, to: wire.AnswerFunc(func(r *wire.Response) {
			mu.Lock()
			defer mu.Unlock()
			if r.Code == wire.OK {
				t.Errorf("request %d answered OK after a failed proposal", r.ID)
			}
			got[r.ID]++
		})}})
		f.err = boom
		p.pending.Add(1)
		if !p.hand(f) {
			t.Fatal("hand refused an entry before stop")
		}
	}
	p.awaiters.close()
	if p.awaiters.n > 2 {
		t.Errorf("%d awaiters started, want at most 2", p.awaiters.n)
	}
	for i := uint64(1); i <= 20; i++ {
		if got[i] != 1 {
			t.Errorf("request %d answered %d times, want once", i, got[i])
		}
	}
	if p.pending.Load() != 0 || p.failed.Load() != 20 {
		t.Errorf("pending %d, failed %d; want 0 and 20", p.pending.Load(), p.failed.Load())
	}
}

func TestParkedFirstAnswerWins(t *testing.T) {
	ps := newParkedSet()
	var answers []*wire.Response
	k := clientSeq{1, 2}
	ps.add(k, &parkedReq{id: 7, to: wire.AnswerFunc(func(r *wire.Response) { answers = append(answers, r) })})
	if !ps.deliver(k, &wire.Response{Code: wire.OK, Token: 5}) {
		t.Fatal("first delivery must find the parked request")
	}
	if ps.deliver(k, &wire.Response{Code: wire.Cancelled}) {
		t.Fatal("second delivery must find nothing")
	}
	if len(answers) != 1 || answers[0].ID != 7 || answers[0].Token != 5 {
		t.Fatalf("answers = %+v", answers)
	}
}

func TestParkedRetryReplacesOlderCopy(t *testing.T) {
	ps := newParkedSet()
	var old, cur []*wire.Response
	k := clientSeq{1, 2}
	ps.add(k, &parkedReq{id: 1, to: wire.AnswerFunc(func(r *wire.Response) { old = append(old, r) })})
	ps.add(k, &parkedReq{id: 2, to: wire.AnswerFunc(func(r *wire.Response) { cur = append(cur, r) })})
	ps.deliver(k, &wire.Response{Code: wire.OK, Token: 9})
	if len(old) != 1 || old[0].Code != wire.Superseded || len(cur) != 1 || cur[0].Token != 9 {
		t.Fatalf("old=%+v cur=%+v", old, cur)
	}
}
