package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/wardenlock/warden/client"
)

func ExampleNew() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.New(ctx, []string{"10.0.0.1:7070", "10.0.0.2:7070", "10.0.0.3:7070"},
		client.WithRequestTimeout(2*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
}

// A Mutex guards work with a fencing token: the storage refuses writes whose
// token is below the highest it has seen, so a holder paused past its lease
// cannot overwrite its successor.
func ExampleMutex() {
	ctx := context.Background()
	c, err := client.New(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s, err := c.NewSession(ctx, client.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(context.Background())

	m := client.NewMutex(s, "/locks/billing/nightly")
	lockCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := m.Lock(lockCtx); err != nil {
		log.Fatal(err) // context.DeadlineExceeded: not granted within 30 s
	}
	defer m.Unlock(context.Background())

	// m.Context() ends if the session is lost: stop the work then.
	runNightlyBilling(m.Context(), m.Token())
}

func ExampleMutex_TryLock() {
	ctx := context.Background()
	c, _ := client.New(ctx, nil)
	defer c.Close()
	s, _ := c.NewSession(ctx)
	defer s.Close(ctx)

	m := client.NewMutex(s, "/locks/reports")
	switch err := m.TryLock(ctx); {
	case errors.Is(err, client.ErrConflict):
		fmt.Println("someone else is running the report")
	case err != nil:
		log.Fatal(err)
	default:
		defer m.Unlock(ctx)
		fmt.Println("running with token", m.Token())
	}
}

func ExampleSession_States() {
	ctx := context.Background()
	c, _ := client.New(ctx, nil)
	defer c.Close()
	s, err := c.NewSession(ctx, client.WithTTL(6*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	for st := range s.States() { // closed after Lost or Closed
		switch st {
		case client.Suspended:
			log.Print("lease unconfirmed: pausing work guarded by this session")
		case client.Connected:
			log.Print("lease confirmed")
		case client.Lost:
			log.Printf("lease lost: %v", s.Err())
		}
	}
}

func ExampleElection() {
	ctx := context.Background()
	c, _ := client.New(ctx, nil)
	defer c.Close()
	s, _ := c.NewSession(ctx)
	defer s.Close(ctx)

	e := client.NewElection(s, "/elections/scheduler")
	if err := e.Campaign(ctx, []byte("node-7:9000")); err != nil {
		log.Fatal(err)
	}
	fmt.Println("leading with token", e.Token())
	<-s.Done() // lead until the session ends
}

func ExampleClient_Observe() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, _ := client.New(ctx, nil)
	defer c.Close()
	for li := range c.Observe(ctx, "/elections/scheduler") {
		if li.Token == 0 {
			fmt.Println("no leader")
			continue
		}
		fmt.Printf("leader %s (token %d)\n", li.Value, li.Token)
	}
}

func ExampleClient_Watch() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, _ := client.New(ctx, nil)
	defer c.Close()
	for wr := range c.Watch(ctx, "/locks/billing", client.WithPrefix()) {
		if wr.Err != nil {
			log.Fatal(wr.Err) // e.g. ErrCompacted: restart from a snapshot of the state
		}
		for _, ev := range wr.Events {
			fmt.Println(ev.Rev, ev.Kind, ev.Path, ev.Cause, ev.Token)
		}
	}
}

// A prefix watch that keeps its position, and a later one that resumes
// from it: every event in between, on every shard, exactly once.
func ExampleWithWatchPosition() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, _ := client.New(ctx, nil)
	defer c.Close()
	var saved client.Position
	for wr := range c.Watch(ctx, "/config", client.WithPrefix()) {
		if wr.Err != nil {
			log.Fatal(wr.Err)
		}
		for _, ev := range wr.Events {
			fmt.Println(ev.Shard, ev.Rev, ev.Kind, ev.Path)
		}
		saved = wr.Position // store saved.String(); ParsePosition reads it back
		break
	}
	for wr := range c.Watch(ctx, "/config", client.WithPrefix(), client.WithWatchPosition(saved)) {
		var ce *client.CompactedError
		if errors.As(wr.Err, &ce) {
			log.Fatalf("shard %d keeps revisions from %d on: read the state again", ce.Shard, ce.Oldest)
		}
		for _, ev := range wr.Events {
			fmt.Println(ev.Shard, ev.Rev, ev.Kind, ev.Path)
		}
	}
}

func ExampleClient_CAS() {
	ctx := context.Background()
	c, _ := client.New(ctx, nil)
	defer c.Close()
	kv, err := c.Get(ctx, "/config/limit")
	if err != nil && !errors.Is(err, client.ErrNotFound) {
		log.Fatal(err)
	}
	// kv.Version is 0 when the key does not exist: CAS then only creates it.
	if _, err := c.CAS(ctx, "/config/limit", kv.Version, []byte("100")); errors.Is(err, client.ErrVersionMismatch) {
		fmt.Println("changed concurrently; read again")
	}
}

func ExampleClient_Acquire() {
	ctx := context.Background()
	c, _ := client.New(ctx, nil)
	defer c.Close()
	l, err := c.Acquire(ctx, "/jobs/reindex", time.Minute, client.WithTry())
	if err != nil {
		log.Fatal(err)
	}
	defer l.Release(ctx)
	if err := l.Renew(ctx, time.Minute); err != nil { // extend while working
		log.Fatal(err)
	}
}

func runNightlyBilling(ctx context.Context, token uint64) {}
