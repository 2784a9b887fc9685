package chaos

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/wire"
)

// Leases is the lease-expiry workload. Each round, a holder lease takes a
// lock, keeps itself alive for a while with explicit keepalives, queues a
// second waiter of its own on the same lock, then stops (a crash); a taker
// on another session waits for the lock. Checked:
//   - no early end: the taker is granted, or the holder hears "gone", no
//     sooner than TTL after the send time of the holder's last acknowledged
//     keepalive;
//   - every lease that should expire does, and its locks go to the next
//     live waiter (never to a waiter of the ended lease itself).
type Leases struct {
	Pairs int
	TTL   time.Duration
	Clock func() int64 // suite clock (ns)

	mu         sync.Mutex
	violations []string
	rounds     int
	pending    []string
	// takerFailures are taker waits that ended in an error.
	takerFailures []string
}

func (w *Leases) violate(format string, args ...any) {
	w.mu.Lock()
	w.violations = append(w.violations, fmt.Sprintf(format, args...))
	w.mu.Unlock()
}

// Run drives the pairs until ctx ends, then waits (bounded) for rounds in
// flight to finish.
func (w *Leases) Run(ctx context.Context, c *Cluster, seed int64) error {
	var wg sync.WaitGroup
	for k := 0; k < w.Pairs; k++ {
		cl, closeCl, err := c.LinkedClient(ctx, fmt.Sprintf("lease-%d", k), k, client.WithRequestTimeout(time.Second),
			client.WithBackoff(20*time.Millisecond, 200*time.Millisecond))
		if err != nil {
			return err
		}
		defer closeCl()
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed*7919 + 1000 + int64(k))) // lease ids must not collide with the register's
			path := fmt.Sprintf("/lease/p%d/lock", k)
			for ctx.Err() == nil {
				w.round(ctx, cl, path, rng)
			}
		}(k)
	}
	wg.Wait()
	return nil
}

// Violations returns the broken promises seen, and rounds that never ended.
func (w *Leases) Violations() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append(append([]string(nil), w.violations...), w.pending...)
}

// TakerFailures lists taker waits that ended in an error.
func (w *Leases) TakerFailures() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.takerFailures...)
}

// Rounds is the number of completed rounds.
func (w *Leases) Rounds() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rounds
}

func (w *Leases) round(ctx context.Context, cl *client.Client, path string, rng *rand.Rand) {
	ttl := w.TTL.Milliseconds()
	lease := uint64(rng.Int63()) | 1
	// Take the lock (waiting for a previous round's taker to let go).
	call := w.Clock()
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	resp, err := cl.Do(actx, &wire.Request{Op: wire.OpAcquire, Path: path, Lease: lease, Owner: "a", TTL: ttl, Wait: 5000})
	cancel()
	if err != nil || resp.Code != wire.OK {
		return
	}
	lastAck := call // the lease's clock starts no earlier than the acquire was sent
	// The holder's own second waiter: must never be granted by the hand-off
	// that ends the lease.
	self := make(chan *wire.Response, 1)
	wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer wcancel()
	go func() {
		r, _ := cl.Do(wctx, &wire.Request{Op: wire.OpAcquire, Path: path, Lease: lease, Owner: "b", TTL: ttl, Wait: wire.WaitForever})
		self <- r
	}()
	// The taker, on a session of its own.
	taken := make(chan int64, 1)
	var takerErr error
	go func() {
		s, err := cl.NewSession(wctx, client.WithTTL(5*time.Second))
		if err != nil {
			taken <- -1
			return
		}
		defer s.Close(context.Background())
		r, err := cl.Do(wctx, &wire.Request{Op: wire.OpAcquire, Path: path, Lease: s.Lease(), Owner: "t", TTL: 5000, Wait: wire.WaitForever})
		at := w.Clock()
		if err != nil || r.Code != wire.OK {
			takerErr = err
			taken <- -1
			return
		}
		taken <- at
		rctx, rcancel := context.WithTimeout(context.Background(), 3*time.Second)
		cl.Do(rctx, &wire.Request{Op: wire.OpRelease, Path: path, Token: r.Token, Lease: s.Lease(), Owner: "t"})
		rcancel()
	}()
	// Keep the holder alive for a while, then stop as if it crashed.
	aliveFor := time.Duration(2+rng.Intn(4)) * w.TTL
	stop := time.Now().Add(aliveFor)
	var kas []string // this round's keepalives, for the violation report
	for time.Now().Before(stop) && ctx.Err() == nil {
		sent := w.Clock()
		kctx, kcancel := context.WithTimeout(ctx, w.TTL/3)
		r, err := cl.Do(kctx, &wire.Request{Op: wire.OpKeepAlive, Lease: lease, TTL: ttl})
		kcancel()
		ret := w.Clock()
		kas = append(kas, kaNote(sent, ret, r, err))
		if err == nil || r != nil {
			gone := false
			for _, l := range r.Leases {
				gone = gone || l == lease
			}
			switch {
			case gone && ret < lastAck+int64(w.TTL):
				w.violate("lease %d reported gone %v after the send of its last acknowledged keepalive (TTL %v); acquire sent at %v, keepalives: %s",
					lease, time.Duration(ret-lastAck), w.TTL, time.Duration(call), strings.Join(kas[max(0, len(kas)-8):], "; "))
				return
			case gone:
				return // lost while partitioned: legitimate
			case r.Code == wire.OK:
				lastAck = sent
			}
		}
		sleepCtx(ctx, w.TTL/3-time.Duration(w.Clock()-sent))
	}
	// Stopped: the lease must end no sooner than lastAck+TTL, its own
	// waiter must be refused, and the taker must be granted. Faults may
	// delay the expiry: allow 25 s.
	limit := time.After(w.TTL + 25*time.Second)
	for taken != nil || self != nil {
		select {
		case at := <-taken:
			taken = nil
			switch {
			case at < 0:
				// Not a broken promise by itself (its own session may have
				// been lost in a partition): counted, and the round ends.
				w.mu.Lock()
				w.takerFailures = append(w.takerFailures, fmt.Sprintf("%s: %v", path, takerErr))
				w.mu.Unlock()
			case at < lastAck+int64(w.TTL):
				w.violate("%s granted to the taker %v after the send of the holder's last acknowledged keepalive (TTL %v): lease ended early",
					path, time.Duration(at-lastAck), w.TTL)
			}
		case r := <-self:
			self = nil
			if r != nil && r.Code == wire.OK {
				w.violate("%s: granted (token %d) to a waiter of lease %d after that lease ended", path, r.Token, lease)
				return
			}
		case <-limit:
			if taken != nil {
				w.violate("%s: holder lease %d stopped, but the taker was not granted within TTL+25s%s", path, lease, holderNote(cl, path, lease))
			}
			if self != nil {
				w.violate("%s: the waiter of ended lease %d was never answered", path, lease)
			}
			return
		}
	}
	w.mu.Lock()
	w.rounds++
	w.mu.Unlock()
}

// holderNote says who holds path now, flagging a holder on the ended lease.
func holderNote(cl *client.Client, path string, ended uint64) string {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	li, err := cl.LockInfo(ctx, path)
	if err != nil {
		return fmt.Sprintf(" (lockinfo: %v)", err)
	}
	for _, h := range li.Holders {
		if h.Lease == ended {
			return fmt.Sprintf(" (it is held by the ENDED lease %d, owner %q, token %d)", h.Lease, h.Owner, h.Token)
		}
	}
	return fmt.Sprintf(" (holders now: %d, waiters: %d)", len(li.Holders), len(li.Waiters))
}

// kaNote describes one keepalive on the suite clock: sent, answered, outcome.
func kaNote(sent, ret int64, r *wire.Response, err error) string {
	out := fmt.Sprintf("sent %v ret %v", time.Duration(sent), time.Duration(ret))
	if r != nil {
		out += fmt.Sprintf(" %v gone %v", r.Code, r.Leases)
	}
	if err != nil {
		out += fmt.Sprintf(" err %v", err)
	}
	return out
}
