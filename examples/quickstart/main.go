// Command quickstart is the Go API tour of README.md and docs/api.md, as a
// program: the README's and docs/api.md's Go blocks are quoted from this
// file (internal/repocheck checks that they still are), and main_test.go
// runs it against a real 3-node cluster.
//
//	go run ./examples/quickstart -endpoints 127.0.0.1:7070,127.0.0.1:7071,127.0.0.1:7072
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/fence"
)

func main() {
	endpoints := flag.String("endpoints", "127.0.0.1:7070,127.0.0.1:7071,127.0.0.1:7072", "Warden nodes")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, strings.Split(*endpoints, ","), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run takes the README's tour, then docs/api.md's.
func run(ctx context.Context, endpoints []string, out io.Writer) error {
	if err := basics(ctx, endpoints, out); err != nil {
		return fmt.Errorf("basics: %w", err)
	}
	if err := beyondLocks(ctx, endpoints, out); err != nil {
		return fmt.Errorf("beyond locks: %w", err)
	}
	return nil
}

// charge stands for the work a lock guards: it gets the fencing token.
func charge(ctx context.Context, token uint64) error {
	return ctx.Err()
}

// basics is the README's "Go API in five minutes".
func basics(ctx context.Context, endpoints []string, out io.Writer) error {
	c, err := client.New(ctx, endpoints)
	if err != nil {
		return err
	}
	defer c.Close()

	// A session is one lease, kept alive in the background at TTL/3. If it is
	// lost, s.Done() closes and every lock taken on it is gone.
	s, err := c.NewSession(ctx, client.WithTTL(10*time.Second))
	if err != nil {
		return err
	}
	defer s.Close(ctx)

	m := client.NewMutex(s, "/locks/billing/job-7")
	if err := m.Lock(ctx); err != nil { // FIFO wait, bounded by ctx
		return err
	}
	// m.Context() ends if the lock is lost (session lost, revoked, released
	// by an admin); context.Cause says why.
	if err := charge(m.Context(), m.Token()); err != nil { // the fencing token goes to the resource
		return err
	}

	// Hierarchy: while job-7 is held, nobody can hold its parent.
	other, err := c.NewSession(ctx)
	if err != nil {
		return err
	}
	defer other.Close(ctx)
	parent := client.NewMutex(other, "/locks/billing")
	if err := parent.TryLock(ctx); errors.Is(err, client.ErrConflict) {
		fmt.Fprintln(out, "/locks/billing is busy: job-7 is held")
	} else if err != nil {
		return err
	} else {
		return errors.New("TryLock on /locks/billing was granted while job-7 was held")
	}
	if err := m.Unlock(ctx); err != nil { // released by token, never by name
		return err
	}
	if err := parent.TryLock(ctx); err != nil { // free now
		return err
	}
	fmt.Fprintln(out, "holding /locks/billing with token", parent.Token())
	if err := parent.Unlock(ctx); err != nil {
		return err
	}

	// KV. WithLease makes a key ephemeral: it is deleted when s ends.
	if _, err := c.Put(ctx, "/services/api/n1", []byte("10.0.0.5:8080"), client.WithLease(s)); err != nil {
		return err
	}
	kv, err := c.Get(ctx, "/services/api/n1")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s = %s (version %d)\n", kv.Key, kv.Value, kv.Version)

	// Leader election: Campaign returns once elected; the token fences.
	e := client.NewElection(s, "/elections/scheduler")
	if err := e.Campaign(ctx, []byte("node-a")); err != nil {
		return err
	}
	fmt.Fprintln(out, "leading /elections/scheduler with token", e.Token())
	if err := e.Resign(ctx); err != nil {
		return err
	}
	return nil
}

// beyondLocks is docs/api.md's tour: fencing, semaphores, multi-locks,
// revocation, lock-delay, priority elections and hand-over.
func beyondLocks(ctx context.Context, endpoints []string, out io.Writer) error {
	c, err := client.New(ctx, endpoints)
	if err != nil {
		return err
	}
	defer c.Close()
	s, err := c.NewSession(ctx, client.WithTTL(10*time.Second))
	if err != nil {
		return err
	}
	defer s.Close(ctx)

	// Fencing in memory: the guard refuses a token lower than one it saw.
	guard := fence.NewGuard()
	m := client.NewMutex(s, "/locks/inventory/sku-42")
	if err := m.Lock(ctx); err != nil {
		return err
	}
	write := func() error { return nil } // the guarded write
	if err := guard.Do(m.Path(), m.Token(), write); err != nil {
		return err
	}
	if err := guard.Do(m.Path(), m.Token()-1, write); !errors.Is(err, fence.ErrStaleToken) {
		return fmt.Errorf("an older token's write: %v, want fence.ErrStaleToken", err)
	}
	if err := m.Unlock(ctx); err != nil {
		return err
	}

	// Counting semaphore: N permits, FIFO, each permit its own fencing token.
	sem := client.NewSemaphore(s, "/pools/db/conns", 10)
	p, err := sem.Acquire(ctx) // TryAcquire fails with ErrConflict
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "permit with token", p.Token())
	if err := p.Release(ctx); err != nil {
		return err
	}

	// Atomic multi-lock: all or nothing, in one global order, so
	// multi-lockers never deadlock each other.
	ml, err := client.LockAll(ctx, s, []string{"/acct/alice", "/acct/bob"})
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "tokens", ml.Tokens()["/acct/alice"] > 0, ml.Tokens()["/acct/bob"] > 0)
	if err := ml.Unlock(ctx); err != nil {
		return err
	}

	// Revocation with a deadline: the holder hears the request and has the
	// grace to release; at the deadline the service revokes the lock.
	r := client.NewMutex(s, "/locks/report", client.WithRevocable(), client.WithLockDelay(5*time.Second))
	if err := r.Lock(ctx); err != nil {
		return err
	}
	asks := c.RevokeRequests(ctx, r.Path(), r.Token())
	if err := c.RevokeLock(ctx, "/locks/report", 0, 10*time.Second); err != nil { // a waiter's request
		return err
	}
	req := <-asks
	fmt.Fprintln(out, "asked to release before", req.Deadline.Format(time.RFC3339))
	if err := r.Unlock(ctx); err != nil { // a graceful release starts no lock-delay
		return err
	}

	// Priority elections and hand-over without a gap.
	a := client.NewElection(s, "/elections/sched", client.WithOwner("node-a"), client.WithPriority(10))
	if err := a.Campaign(ctx, []byte("node-a")); err != nil {
		return err
	}
	b := client.NewElection(s, "/elections/sched", client.WithOwner("node-b"))
	elected := make(chan error, 1)
	go func() { elected <- b.Campaign(ctx, []byte("node-b")) }()
	for {
		err := a.HandOver(ctx, "node-b") // node-b leads, in the same Raft command
		if err == nil {
			break
		}
		if !errors.Is(err, client.ErrNotFound) { // node-b is not waiting yet
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := <-elected; err != nil {
		return err
	}
	fmt.Fprintln(out, "node-b leads with token", b.Token())
	return b.Resign(ctx)
}
