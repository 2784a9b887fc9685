package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/internal/linmodel"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/wire"
)

// registerRun is the fault suite's register workload (three clients that
// lock, release, read and keep alive, each on one connection) and its
// history.
type registerRun struct {
	w    *linmodel.Register
	hist *linmodel.History
	stop func() // stops the clients and waits for them
}

// startRegister starts the register clients on endpoints.
func startRegister(t *testing.T, ctx context.Context, endpoints []string, seed int64) *registerRun {
	t.Helper()
	start := time.Now()
	hist := linmodel.NewHistory(func() int64 { return int64(time.Since(start)) })
	w := &linmodel.Register{Clients: 3, Rate: 10 * time.Millisecond, Hist: hist}
	var clients []*client.Client
	for i := 0; i < w.Clients; i++ {
		cl, err := client.New(ctx, endpoints, client.WithRequestTimeout(time.Second), client.WithPoolSize(1),
			client.WithBackoff(20*time.Millisecond, 200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		clients = append(clients, cl)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); w.RunWith(wctx, clients, seed) }()
	return &registerRun{w: w, hist: hist, stop: func() { cancel(); <-done }}
}

// check reads every register path through cl (retried while it fails: a
// read changes nothing), adds the reads to the history and fails the test
// unless the history is linearizable (porcupine; fencing tokens strictly
// increase per path). It returns the operations and the unknown outcomes.
func (r *registerRun) check(t *testing.T, ctx context.Context, cl *client.Client) (ops, unknown int) {
	t.Helper()
	for _, p := range linmodel.RegisterPaths() {
		var call int64
		var resp *wire.Response
		nodetest.WaitFor(t, 30*time.Second, "a read of "+p, func() (err error) {
			call = r.hist.Call()
			resp, err = cl.Do(ctx, &wire.Request{Op: wire.OpLockInfo, Path: p})
			if resp != nil && (resp.Code == wire.OK || resp.Code == wire.NotFound) {
				return nil
			}
			return fmt.Errorf("%v", err)
		})
		out := linmodel.RegOutput{Code: resp.Code}
		for _, h := range resp.Holders {
			if h.Path == "" || h.Path == p {
				out.Holder = &linmodel.RegHold{Lease: h.Lease, Owner: h.Owner, Token: h.Token, Count: h.Count}
			}
		}
		r.hist.Add(99, linmodel.RegInput{Kind: linmodel.RegRead, Path: p}, call, out)
	}
	ops, unknown = r.w.Stats()
	res, _ := porcupine.CheckOperationsVerbose(linmodel.RegisterModel(), r.hist.Ops(), 3*time.Minute)
	if res != porcupine.Ok {
		t.Fatalf("register history (%d ops, %d unknown) is %v, not linearizable", ops, unknown, res)
	}
	return ops, unknown
}

// keptLocksHold checks that the locks holdLocks took are still held, with
// their tokens (reads retried while they fail).
func keptLocksHold(t *testing.T, ctx context.Context, cl *client.Client, kept map[string]uint64) {
	t.Helper()
	for p, tok := range kept {
		var info client.LockInfo
		nodetest.WaitFor(t, 30*time.Second, "a read of "+p, func() (err error) {
			info, err = cl.LockInfo(ctx, p)
			return err
		})
		if len(info.Holders) != 1 || info.Holders[0].Token != tok {
			t.Fatalf("%s: holders %+v, want the token %d granted before", p, info.Holders, tok)
		}
	}
}

// keptLocksAdvance releases the locks holdLocks took and takes them again:
// each new token must be above the old one.
func keptLocksAdvance(t *testing.T, ctx context.Context, cl *client.Client, kept map[string]uint64) {
	t.Helper()
	for p, tok := range kept {
		if _, err := cl.Do(ctx, &wire.Request{Op: wire.OpRelease, Path: p, Token: tok}); err != nil {
			t.Fatalf("release %s: %v", p, err)
		}
		resp, err := cl.Do(ctx, &wire.Request{Op: wire.OpAcquire, Path: p, TTL: 30000})
		if err != nil {
			t.Fatalf("acquire %s: %v", p, err)
		}
		if resp.Token <= tok {
			t.Fatalf("%s: token %d, not above %d", p, resp.Token, tok)
		}
	}
}
