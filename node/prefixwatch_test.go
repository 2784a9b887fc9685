package node_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/node"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/wire"
)

// seen collects a watch's events by (path, kind, cause) and checks, as
// they come, that each shard's revisions only grow.
type seen struct {
	mu     sync.Mutex
	count  map[string]int
	shards map[uint64]uint64 // last revision per shard
	order  error
	pos    client.Position
	shard  map[string]uint64 // the shard of each path's last event
}

func newSeen() *seen {
	return &seen{count: map[string]int{}, shards: map[uint64]uint64{}, shard: map[string]uint64{}}
}

func evKey(path string, kind wire.EventKind, cause wire.Cause) string {
	return fmt.Sprintf("%s %s/%s", path, kind, cause)
}

// follow reads ch until it closes, recording every event.
func (s *seen) follow(t *testing.T, ch <-chan client.WatchResponse) <-chan error {
	end := make(chan error, 1)
	go func() {
		for wr := range ch {
			if wr.Err != nil {
				end <- wr.Err
				return
			}
			s.mu.Lock()
			for _, ev := range wr.Events {
				if last := s.shards[ev.Shard]; ev.Rev <= last && s.order == nil {
					s.order = fmt.Errorf("shard %d: revision %d after %d", ev.Shard, ev.Rev, last)
				}
				s.shards[ev.Shard] = ev.Rev
				s.count[evKey(ev.Path, ev.Kind, ev.Cause)]++
				s.shard[ev.Path] = ev.Shard
			}
			s.pos = wr.Position
			s.mu.Unlock()
		}
		end <- nil
	}()
	return end
}

// waitFor waits until every key in want was seen at least once.
func (s *seen) waitFor(t *testing.T, want []string) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("%d events", len(want)), func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, k := range want {
			if s.count[k] == 0 {
				return false
			}
		}
		return true
	})
}

// exactlyOnce fails unless every key in want was seen once, no other key
// under the watch more than once, and shard revisions came in order.
func (s *seen) exactlyOnce(t *testing.T, want []string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.order != nil {
		t.Fatal(s.order)
	}
	for _, k := range want {
		if s.count[k] != 1 {
			t.Errorf("%s: seen %d times, want once", k, s.count[k])
		}
	}
	for k, n := range s.count {
		if n > 1 {
			t.Errorf("%s: seen %d times", k, n)
		}
	}
}

// warmUp puts keys under prefix until the watch shows one: the watch is
// then running (Watch subscribes in the background).
func (s *seen) warmUp(t *testing.T, ctx context.Context, cl *client.Client, prefix string) {
	t.Helper()
	for i := 0; ; i++ {
		key := fmt.Sprintf("%s/warm/k%d", prefix, i)
		if _, err := cl.Put(ctx, key, []byte("x")); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(200 * time.Millisecond)
		for time.Now().Before(deadline) {
			s.mu.Lock()
			n := 0
			for k, c := range s.count {
				if strings.HasPrefix(k, prefix+"/warm/") {
					n += c
				}
			}
			s.mu.Unlock()
			if n > 0 {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		if ctx.Err() != nil {
			t.Fatal("the watch never showed a put")
		}
	}
}

func (s *seen) position() client.Position {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pos
}

// A prefix watch whose subtree spans every shard sees each put, delete,
// grant and release under it exactly once, with its cause, in revision
// order per shard, and its events come from at least three shards.
func TestPrefixWatchAcrossShards(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 3})
	cl := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := newSeen()
	ch := cl.Watch(ctx, "/cfg", client.WithPrefix())
	end := s.follow(t, ch)
	// The watch is running once an event of a warm-up put arrives.
	s.warmUp(t, ctx, cl, "/cfg")

	sess := session(t, cl, 10*time.Second)
	var want []string
	for i := 0; i < 12; i++ {
		key := fmt.Sprintf("/cfg/n%d/key", i)
		lock := fmt.Sprintf("/cfg/n%d/lock", i)
		if _, err := cl.Put(ctx, key, []byte("v")); err != nil {
			t.Fatal(err)
		}
		if err := cl.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
		m := client.NewMutex(sess, lock)
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		want = append(want, evKey(key, wire.EvKVPut, wire.CauseUser), evKey(key, wire.EvKVDelete, wire.CauseUser),
			evKey(lock, wire.EvAcquired, wire.CauseDirect), evKey(lock, wire.EvReleased, wire.CauseReleased))
	}
	// A marker written last on each shard: once all have arrived, every
	// earlier event of that shard has too.
	s.waitFor(t, want)
	s.exactlyOnce(t, want)
	s.mu.Lock()
	shards := len(s.shards)
	s.mu.Unlock()
	if shards < 3 {
		t.Fatalf("events came from %d shards, want the subtree spread over at least 3", shards)
	}
	if p := s.position(); len(p) != 3 {
		t.Fatalf("position %v, want one revision for each of the 3 shards", p)
	}
	cancel()
	if err := <-end; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("watch ended with %v", err)
	}
}

// Ranges split off and moved to another shard under a running prefix
// watch lose nothing: every acknowledged put in them is seen exactly once.
func TestPrefixWatchFollowsRangeMoves(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 2})
	cl := newClient(t, c)
	admin := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := newSeen()
	end := s.follow(t, cl.Watch(ctx, "/mv", client.WithPrefix()))
	s.warmUp(t, ctx, cl, "/mv")

	var (
		mu    sync.Mutex
		acked []string
		wg    sync.WaitGroup
	)
	wctx, stopWriting := context.WithCancel(ctx)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; wctx.Err() == nil; i++ {
			key := fmt.Sprintf("/mv/n%d/k%d", i%4, i)
			pctx, pcancel := context.WithTimeout(wctx, 20*time.Second)
			_, err := cl.Put(pctx, key, []byte("v"))
			pcancel()
			if err == nil {
				mu.Lock()
				acked = append(acked, evKey(key, wire.EvKVPut, wire.CauseUser))
				mu.Unlock()
			}
		}
	}()
	moved := moveRounds(t, ctx, admin, 4)
	stopWriting()
	wg.Wait()
	if moved == 0 || len(acked) < 20 {
		t.Fatalf("too little happened: %d moves, %d puts", moved, len(acked))
	}
	s.waitFor(t, acked)
	s.exactlyOnce(t, acked)
	cancel()
	if err := <-end; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("watch ended with %v", err)
	}
}

// A prefix watch resumed from its position after its connection is cut
// delivers exactly the events it missed, from every shard.
func TestPrefixWatchResumesFromPosition(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 3})
	writer := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	first, err := client.New(ctx, c.AllEndpoints())
	if err != nil {
		t.Fatal(err)
	}
	s1 := newSeen()
	s1.follow(t, first.Watch(ctx, "/rs", client.WithPrefix()))
	s1.warmUp(t, ctx, writer, "/rs")
	var before, after []string
	for i := 0; i < 9; i++ {
		key := fmt.Sprintf("/rs/n%d/before", i)
		if _, err := writer.Put(ctx, key, []byte("v")); err != nil {
			t.Fatal(err)
		}
		before = append(before, evKey(key, wire.EvKVPut, wire.CauseUser))
	}
	s1.waitFor(t, before)
	pos := s1.position()
	first.Close() // the connection is cut; the position is all that is kept

	for i := 0; i < 9; i++ {
		key := fmt.Sprintf("/rs/n%d/after", i)
		if _, err := writer.Put(ctx, key, []byte("v")); err != nil {
			t.Fatal(err)
		}
		after = append(after, evKey(key, wire.EvKVPut, wire.CauseUser))
	}
	second := newClient(t, c)
	s2 := newSeen()
	s2.follow(t, second.Watch(ctx, "/rs", client.WithPrefix(), client.WithWatchPosition(pos)))
	// One more event per namespace after the missed ones: when they are
	// in, every missed one has been delivered or never will be.
	var marks []string
	for i := 0; i < 9; i++ {
		key := fmt.Sprintf("/rs/n%d/mark", i)
		if _, err := writer.Put(ctx, key, []byte("v")); err != nil {
			t.Fatal(err)
		}
		marks = append(marks, evKey(key, wire.EvKVPut, wire.CauseUser))
	}
	s2.waitFor(t, marks)
	s2.exactlyOnce(t, append(after, marks...))
	s2.mu.Lock()
	defer s2.mu.Unlock()
	for _, k := range before {
		if s2.count[k] != 0 {
			t.Errorf("%s: delivered again after resuming past it", k)
		}
	}
}

// A position older than one shard's retained history is refused with a
// CompactedError naming that shard and its oldest revision.
func TestPrefixWatchCompactionNamesShard(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 3, Edit: func(cfg *node.Config) {
		cfg.NoAudit = true
		cfg.Shard.FeedSize = 16
	}})
	cl := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := newSeen()
	wctx, stop := context.WithCancel(ctx)
	end := s.follow(t, cl.Watch(wctx, "/cp", client.WithPrefix()))
	s.warmUp(t, ctx, cl, "/cp")
	if _, err := cl.Put(ctx, "/cp/busy/k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, []string{evKey("/cp/busy/k", wire.EvKVPut, wire.CauseUser)})
	pos := s.position()
	stop()
	<-end
	s.mu.Lock()
	busy := s.shard["/cp/busy/k"]
	s.mu.Unlock()
	for i := 0; i < 40; i++ { // far past the ring of 16 on the busy shard only
		if _, err := cl.Put(ctx, "/cp/busy/k", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	// Every replica has applied the puts, so whichever serves the watch has
	// dropped the position's revision from its ring.
	c.WaitFor(30*time.Second, "every replica to apply the puts", func() error {
		var want uint64
		for _, n := range c.Nodes {
			if s, ok := n.Host.Shard(busy); ok && s.IsLeader() {
				want = s.AppliedIndex()
			}
		}
		for i, n := range c.Nodes {
			if s, ok := n.Host.Shard(busy); ok && (want == 0 || s.AppliedIndex() < want) {
				return fmt.Errorf("node %d applied %d of %d", i+1, s.AppliedIndex(), want)
			}
		}
		return nil
	})
	ch := cl.Watch(ctx, "/cp", client.WithPrefix(), client.WithWatchPosition(pos))
	wr := <-ch
	var ce *client.CompactedError
	if !errors.As(wr.Err, &ce) || !errors.Is(wr.Err, client.ErrCompacted) {
		t.Fatalf("resuming from %v after 40 puts: %+v, want a CompactedError", pos, wr)
	}
	want, _ := pos.Rev(busy)
	if ce.Shard != busy || ce.Oldest <= want+1 {
		t.Fatalf("compacted shard %d from %d, want shard %d (position %d) from a later revision", ce.Shard, ce.Oldest, busy, want)
	}
}

// A prefix inside one namespace, watched over the wire, goes on through a
// move of its range: no push ends the stream, and the next put arrives
// from the destination shard.
func TestDeepPrefixWatchOutlivesRangeMove(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 2})
	admin := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := "/deep/n0"
	if err := admin.SplitRange(ctx, ns); err != nil && !errors.Is(err, wire.ErrInvalidArgument) {
		t.Fatalf("split at %s: %v", ns, err)
	}
	key := wire.RouteKey(ns)
	rows := waitRange(t, admin, key)
	to := otherShard(rows, key)

	if _, err := admin.Put(ctx, ns+"/init", []byte("v")); err != nil {
		t.Fatal(err)
	}
	// Through the leader of the shard holding ns, which has applied the put.
	home := uint64(0)
	for _, id := range c.ShardIDs() {
		if id != to {
			home = id
		}
	}
	leader := -1
	c.WaitFor(30*time.Second, "a leader of the shard holding "+ns, func() error {
		if leader = c.LeaderOf(home); leader < 0 {
			return errors.New("no leader")
		}
		return nil
	})
	wc, hello := nodetest.DialWire(t, c.Cfgs[leader].ClientAddr, nil, "", 0)
	if hello.Code != wire.OK {
		t.Fatalf("hello: %v %s", hello.Code, hello.Msg)
	}
	// The first answer has the position on both shards and, for clients
	// resuming by revision, Rev: the start on the shard holding the prefix.
	r := wc.Do(&wire.Request{Op: wire.OpWatch, Path: ns, Flags: wire.FlagPrefix})
	var homeRev uint64
	for _, p := range r.Position {
		if p.Shard == home {
			homeRev = p.Rev
		}
	}
	if r.Code != wire.OK || len(r.Position) != 2 || r.Rev == 0 || r.Rev != homeRev {
		t.Fatalf("watch: %v %s, position %v, rev %d", r.Code, r.Msg, r.Position, r.Rev)
	}
	// next reads pushes until an event on path arrives; any ending push fails.
	next := func(path string) wire.Event {
		t.Helper()
		for {
			r := wc.Recv(30 * time.Second)
			if r == nil {
				t.Fatalf("the stream ended before %s arrived", path)
			}
			if r.Code != wire.OK {
				t.Fatalf("the stream ended: %v %s", r.Code, r.Msg)
			}
			for _, ev := range r.Events {
				if ev.Path == path {
					return ev
				}
			}
		}
	}
	if _, err := admin.Put(ctx, ns+"/before", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if ev := next(ns + "/before"); ev.Shard == to {
		t.Fatalf("the put before the move came from shard %d, the destination", ev.Shard)
	}
	if _, err := admin.MoveRange(ctx, key, to); err != nil {
		t.Fatalf("move the range of %s to shard %d: %v", ns, to, err)
	}
	waitOn(t, admin, key, to)
	if _, err := admin.Put(ctx, ns+"/after", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if ev := next(ns + "/after"); ev.Shard != to {
		t.Fatalf("the put after the move came from shard %d, want %d", ev.Shard, to)
	}
}

// cutProxy forwards TCP connections to target until cut closes every one
// it carries (new ones are still accepted): a connection cut the client
// sees as its server going away.
type cutProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { io.Copy(out, in); out.Close() }()
			go func() { io.Copy(in, out); in.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// A prefix watch through a router with no replicas (every shard's part
// forwarded to another node) resumes from its position after its
// connection is cut and after a node it read from stops: each put is
// delivered exactly once.
func TestPrefixWatchThroughRouterAcrossCuts(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 3})
	addr := startStandaloneRouter(t, c)
	proxy := startCutProxy(t, addr)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var logs syncBuffer // the client logs each resubscription at debug level
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	watcher, err := client.New(ctx, []string{proxy.addr()}, client.WithoutDirectRouting(), client.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { watcher.Close() })
	writer := newClient(t, c)
	s := newSeen()
	end := s.follow(t, watcher.Watch(ctx, "/cut", client.WithPrefix()))
	s.warmUp(t, ctx, writer, "/cut")

	var all []string
	round := func(name string) {
		t.Helper()
		var keys []string
		for i := 0; i < 9; i++ {
			key := fmt.Sprintf("/cut/n%d/%s", i, name)
			if _, err := writer.Put(ctx, key, []byte("v")); err != nil {
				t.Fatal(err)
			}
			keys = append(keys, evKey(key, wire.EvKVPut, wire.CauseUser))
		}
		all = append(all, keys...)
		s.waitFor(t, keys)
	}
	resumes := func() int { return strings.Count(logs.String(), "watch resubscribing") }
	round("a")
	proxy.cut()
	round("b")
	afterCut := resumes()
	// The router forwards a shard's part to its leader: stopping that node
	// ends it, and the stream resumes on the other replicas.
	victim := -1
	c.WaitFor(30*time.Second, "a shard leader", func() error {
		if victim = c.LeaderOf(c.ShardIDs()[0]); victim < 0 {
			return errors.New("no leader")
		}
		return nil
	})
	c.StopNode(victim)
	round("c")
	s.exactlyOnce(t, all)
	if afterCut == 0 || resumes() <= afterCut {
		t.Fatalf("the watch resubscribed %d times after the cut, %d in all: want at least once after each", afterCut, resumes())
	}
	cancel()
	if err := <-end; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("watch ended with %v", err)
	}
}
