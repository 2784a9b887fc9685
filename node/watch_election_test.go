package node_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/wire"
)

// TestWatchResumesFromRevisionAcrossReconnect: events on a prefix arrive in
// revision order with their cause; after the serving node goes away, the
// watch resumes from the last revision seen on another node, with nothing
// missed and nothing twice.
func TestWatchResumesFromRevisionAcrossReconnect(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{})
	ctx := ctxT(t, 90*time.Second)
	writer := newClient(t, c)

	// The watcher holds one connection (to the first endpoint); the other
	// nodes are its failover endpoints.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watcher, err := client.New(ctx, c.AllEndpoints(), client.WithPoolSize(1))
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	events := watcher.Watch(wctx, "/watch/ns", client.WithPrefix())

	const n = 40
	var (
		mu  sync.Mutex
		got []wire.Event
	)
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for wr := range events {
			if wr.Err != nil {
				t.Errorf("watch error: %v", wr.Err)
				return
			}
			mu.Lock()
			got = append(got, wr.Events...)
			done := countKind(got, wire.EvKVPut) >= n
			mu.Unlock()
			if done {
				return
			}
		}
	}()
	time.Sleep(300 * time.Millisecond) // let the watch register
	for i := 0; i < n; i++ {
		if _, err := writer.Put(ctx, fmt.Sprintf("/watch/ns/k%02d", i), []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		if i == n/2 {
			// The watcher's one connection goes to the first endpoint:
			// stopping that node forces the watch to resume on another
			// node from the last revision it saw.
			c.StopNode(0)
			c.StartNode(0)
		}
	}
	select {
	case <-collected:
	case <-time.After(40 * time.Second):
		mu.Lock()
		t.Fatalf("watch delivered %d of %d puts", countKind(got, wire.EvKVPut), n)
	}
	mu.Lock()
	defer mu.Unlock()
	var last uint64
	seen := map[string]bool{}
	for _, ev := range got {
		if ev.Rev <= last {
			t.Fatalf("revision %d after %d: out of order or duplicated", ev.Rev, last)
		}
		last = ev.Rev
		if ev.Kind == wire.EvKVPut {
			if seen[ev.Path] {
				t.Fatalf("put on %s delivered twice", ev.Path)
			}
			seen[ev.Path] = true
		}
	}
	for i := 0; i < n; i++ {
		if !seen[fmt.Sprintf("/watch/ns/k%02d", i)] {
			t.Fatalf("put %d missed", i)
		}
	}
}

func countKind(evs []wire.Event, k wire.EventKind) int {
	n := 0
	for _, ev := range evs {
		if ev.Kind == k {
			n++
		}
	}
	return n
}

// TestElectionHasOneLeaderAtATime: several candidates campaign; leadership
// passes from one to the next as leaders resign, never overlapping, with the
// leadership token increasing, and Leader() agrees with the elected one.
func TestElectionHasOneLeaderAtATime(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{})
	ctx := ctxT(t, 60*time.Second)
	cl := newClient(t, c)
	const candidates = 4
	var (
		mu        sync.Mutex
		leaders   int
		maxSeen   int
		lastToken uint64
		order     []string
	)
	var wg sync.WaitGroup
	for i := 0; i < candidates; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			s := session(t, cl, 10*time.Second)
			e := client.NewElection(s, "/elections/scheduler")
			name := fmt.Sprintf("cand-%d", i)
			if err := e.Campaign(ctx, []byte(name)); err != nil {
				t.Errorf("%s: campaign: %v", name, err)
				return
			}
			mu.Lock()
			leaders++
			if leaders > maxSeen {
				maxSeen = leaders
			}
			if e.Token() <= lastToken {
				t.Errorf("leadership token %d not above the previous %d", e.Token(), lastToken)
			}
			lastToken = e.Token()
			order = append(order, name)
			mu.Unlock()
			li, err := cl.Leader(ctx, "/elections/scheduler")
			if err != nil || string(li.Value) != name || li.Token != e.Token() {
				t.Errorf("%s elected but Leader() says %q token %d (%v)", name, li.Value, li.Token, err)
			}
			time.Sleep(100 * time.Millisecond)
			mu.Lock()
			leaders--
			mu.Unlock()
			if err := e.Resign(ctx); err != nil {
				t.Errorf("%s: resign: %v", name, err)
			}
		}(i)
	}
	wg.Wait()
	if maxSeen != 1 {
		t.Fatalf("%d leaders at once", maxSeen)
	}
	if len(order) != candidates {
		t.Fatalf("only %d of %d candidates were ever elected: %v", len(order), candidates, order)
	}
}
