package router

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"maps"
	"math"
	"net"
	"slices"
	"testing"

	"github.com/wardenlock/warden/feed"
	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/wire"
)

func threeShards() *placement.Table {
	ids := []uint64{2, 3, 4}
	t := &placement.Table{Gen: 1, NamespaceDepth: 2, Ranges: placement.EvenRanges(ids, 1)}
	for _, id := range ids {
		t.Shards = append(t.Shards, placement.ShardInfo{ID: id, Replicas: []uint64{1}})
	}
	return t
}

// legPlan is a leg's feed start revision and the revision it drops events
// up to, per shard.
type legPlan map[uint64][2]uint64

func plan(legs []*leg) legPlan {
	out := legPlan{}
	for _, l := range legs {
		out[l.shard] = [2]uint64{l.rev, l.after}
	}
	return out
}

// Where each shard's part of a prefix watch starts, and the positions and
// revisions that are refused.
func TestPrefixWatchStartLegs(t *testing.T) {
	tbl := threeShards()
	deep, _ := tbl.Locate("/cfg/app")
	for _, tc := range []struct {
		name string
		req  wire.Request
		want legPlan
		bad  bool
	}{
		{name: "from now", req: wire.Request{Path: "/cfg"},
			want: legPlan{2: {0, 0}, 3: {0, 0}, 4: {0, 0}}},
		{name: "a position: after each named shard, an unnamed one from its first event",
			req:  wire.Request{Path: "/cfg", Position: []wire.ShardRev{{Shard: 2, Rev: 10}, {Shard: 3, Rev: 0}, {Shard: 9, Rev: 5}}},
			want: legPlan{2: {11, 10}, 3: {1, 0}, 4: {1, 0}}},
		{name: "a revision for a prefix in one range", req: wire.Request{Path: "/cfg/app", Rev: 7},
			want: func() legPlan {
				p := legPlan{2: {0, 0}, 3: {0, 0}, 4: {0, 0}}
				p[deep.Shard] = [2]uint64{7, 6}
				return p
			}()},
		{name: "a revision for a prefix spanning shards", req: wire.Request{Path: "/cfg", Rev: 7}, bad: true},
		{name: "a shard named twice", req: wire.Request{Path: "/cfg", Position: []wire.ShardRev{{Shard: 2, Rev: 1}, {Shard: 2, Rev: 2}}}, bad: true},
		{name: "the largest revision", req: wire.Request{Path: "/cfg", Position: []wire.ShardRev{{Shard: 2, Rev: math.MaxUint64}}}, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			legs, err := startLegs(tbl, &tc.req)
			if tc.bad {
				if !errors.Is(err, wire.ErrInvalidArgument) {
					t.Fatalf("got %v, want InvalidArgument", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := plan(legs)
			if len(got) != len(tc.want) {
				t.Fatalf("legs %v, want %v", got, tc.want)
			}
			for s, w := range tc.want {
				if got[s] != w {
					t.Fatalf("legs %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// localHost is a node holding a replica of every shard of its table.
type localHost struct {
	Host // the methods a prefix watch does not call
	tbl  *placement.Table
	reps map[uint64]*feedReplica
}

func (h *localHost) Table() *placement.Table                                        { return h.tbl }
func (h *localHost) SetForwarder(func(uint64, *wire.Request, func(*wire.Response))) {}
func (h *localHost) Replica(id uint64) (Replica, bool) {
	r, ok := h.reps[id]
	return r, ok
}

// feedReplica is one shard's replica as a watch sees it: Watch subscribes
// at revision last, then runs onWatch (another shard's events arriving
// while this leg starts).
type feedReplica struct {
	Replica
	last    uint64
	sub     feed.Subscriber
	onWatch func()
}

func (r *feedReplica) Watch(_ string, _ bool, _ uint64, sub feed.Subscriber) (uint64, uint64, error) {
	r.sub = sub
	if r.onWatch != nil {
		r.onWatch()
	}
	return 1, r.last, nil
}
func (r *feedReplica) Unwatch(uint64) {}

// frames decodes what the connection queued for its client.
func frames(t *testing.T, c *conn) []wire.Response {
	t.Helper()
	c.mu.Lock()
	out := append([]byte(nil), c.out...)
	c.mu.Unlock()
	rd := bufio.NewReader(bytes.NewReader(out))
	var got []wire.Response
	for {
		body, err := wire.ReadFrame(rd, 1<<20, nil)
		if err == io.EOF {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
		var r wire.Response
		if err := wire.DecodeResponse(body, &r); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
}

// Events that arrive on a shard while the other shards' parts of a prefix
// watch are still starting follow the first answer, whose position each
// shard's events continue: a client resuming from any event's position
// misses nothing and replays nothing.
func TestPrefixWatchAnswersBeforeAnyEvent(t *testing.T) {
	ev := func(shard, rev uint64) []wire.Event {
		return []wire.Event{{Shard: shard, Rev: rev, Kind: wire.EvKVPut, Path: "/cfg/k"}}
	}
	reps := map[uint64]*feedReplica{2: {last: 10}, 3: {last: 20}, 4: {last: 30}}
	reps[3].onWatch = func() { reps[2].sub.Send(ev(2, 11)) }
	reps[4].onWatch = func() {
		reps[2].sub.Send(ev(2, 12))
		reps[3].sub.Send(ev(3, 21))
	}
	c, req := startPrefixWatch(t, reps)
	reps[2].sub.Send(ev(2, 13))

	got := frames(t, c)
	if len(got) == 0 || got[0].ID != req.ID || got[0].Code != wire.OK {
		t.Fatalf("first frame %+v, want the watch's OK answer", got)
	}
	start := map[uint64]uint64{}
	for _, p := range got[0].Position {
		start[p.Shard] = p.Rev
	}
	if want := map[uint64]uint64{2: 10, 3: 20, 4: 30}; !maps.Equal(start, want) {
		t.Fatalf("answer position %v, want %v", start, want)
	}
	var revs []uint64
	for _, f := range got[1:] {
		if f.ID != 0 || f.Stream != req.ID {
			t.Fatalf("frame %+v after the answer, want a push on stream %d", f, req.ID)
		}
		for _, e := range f.Events {
			if e.Rev != start[e.Shard]+1 {
				t.Fatalf("shard %d event %d follows revision %d", e.Shard, e.Rev, start[e.Shard])
			}
			start[e.Shard] = e.Rev
			revs = append(revs, e.Rev)
		}
	}
	if !slices.Equal(revs, []uint64{11, 12, 21, 13}) {
		t.Fatalf("pushed revisions %v, want 11 12 21 13", revs)
	}
}

// startPrefixWatch starts a prefix watch on /cfg over three shards served
// by reps, answered on a pipe connection.
func startPrefixWatch(t *testing.T, reps map[uint64]*feedReplica) (*conn, *wire.Request) {
	t.Helper()
	s := newTestServer(t, Config{Host: &localHost{tbl: threeShards(), reps: reps}})
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	c := newConn(s, a, nil)
	req := &wire.Request{ID: 5, Op: wire.OpWatch, Path: "/cfg", Flags: wire.FlagPrefix}
	c.watchPrefix(req, func(r *wire.Response) {
		r.ID = req.ID
		c.send(r)
	})
	return c, req
}

// A watch that gathers more than maxHeld events before every shard's part
// has answered is refused as a consumer that fell behind, with nothing
// pushed.
func TestPrefixWatchBoundsHeldEvents(t *testing.T) {
	reps := map[uint64]*feedReplica{2: {last: 10}, 3: {last: 20}, 4: {last: 30}}
	reps[3].onWatch = func() {
		evs := make([]wire.Event, maxHeld+1)
		for i := range evs {
			evs[i] = wire.Event{Shard: 2, Rev: uint64(11 + i), Kind: wire.EvKVPut, Path: "/cfg/k"}
		}
		if reps[2].sub.Send(evs) {
			t.Error("the leg took more events than the watch holds")
		}
	}
	c, req := startPrefixWatch(t, reps)
	got := frames(t, c)
	if len(got) != 1 || got[0].ID != req.ID || got[0].Code != wire.TooMany {
		t.Fatalf("%d frames %.500v; want one TooMany answer", len(got), got)
	}
}
