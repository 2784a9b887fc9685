package shard

import (
	"testing"

	"github.com/wardenlock/warden/wire"
)

func TestWaitCountsFollowQueues(t *testing.T) {
	const p, q = "/a/b/lock", "/a/c/lock"
	queued := wire.Event{Kind: wire.EvQueued, Path: p}
	handoff := wire.Event{Kind: wire.EvAcquired, Cause: wire.CauseHandOff, Path: p}
	direct := wire.Event{Kind: wire.EvAcquired, Cause: wire.CauseDirect, Path: p}
	dequeued := wire.Event{Kind: wire.EvDequeued, Cause: wire.CauseCancelled, Path: p}
	acquire := func(path string, wait int64) proposal {
		return proposal{req: &wire.Request{Op: wire.OpAcquire, Path: path, Wait: wait, Client: 7, Seq: 1}}
	}
	for _, tc := range []struct {
		name   string
		events []wire.Event
		want   bool
	}{
		{name: "nothing queued"},
		{name: "one waiter", events: []wire.Event{queued}, want: true},
		{name: "a direct grant is no waiter", events: []wire.Event{direct}},
		{name: "handed off", events: []wire.Event{queued, handoff}},
		{name: "two queued, one handed off", events: []wire.Event{queued, queued, handoff}, want: true},
		{name: "cancelled", events: []wire.Event{queued, dequeued}},
		{name: "never below zero", events: []wire.Event{handoff, handoff, queued}, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w waitCounts
			for i := range tc.events {
				w.observe(&tc.events[i])
			}
			if got := w.queued(p); got != tc.want {
				t.Fatalf("queued(%s) = %v, want %v", p, got, tc.want)
			}
			if w.queued(q) {
				t.Fatalf("queued(%s) without waiters", q)
			}
			if got := w.mustQueue([]proposal{acquire(p, 1000)}); got != tc.want {
				t.Fatalf("mustQueue(waiting acquire) = %v, want %v", got, tc.want)
			}
			if w.mustQueue([]proposal{acquire(p, wire.WaitNone)}) {
				t.Fatal("a try-lock must not be held: it is answered at once")
			}
			if w.mustQueue([]proposal{acquire(p, 1000), acquire(q, 1000)}) {
				t.Fatal("a batch with an acquire that may be granted must not be held")
			}
			rel := proposal{req: &wire.Request{Op: wire.OpRelease, Path: p}}
			if w.mustQueue([]proposal{acquire(p, 1000), rel}) {
				t.Fatal("a batch with a release must not be held")
			}
		})
	}
}

func TestWaitCountsResetOnLeadership(t *testing.T) {
	var w waitCounts
	w.observe(&wire.Event{Kind: wire.EvQueued, Path: "/a/b"})
	w.reset()
	if w.queued("/a/b") || w.paths.Load() != 0 {
		t.Fatal("counts survived the reset")
	}
}
