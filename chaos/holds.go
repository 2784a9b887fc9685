package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/wardenlock/warden/client"
)

// Holds is the failed-acquire workload. Workers take hierarchical locks
// (a namespace lock and two locks under it, and one elsewhere) with Lock
// and a deadline of their own, or TryLock, on their session or (one
// attempt in five, a try) without one, each attempt under an owner name of
// its own, hold what they get for a moment and release it; a
// poller reads every path's lock info every second. Checked:
//   - no attempt the client reported as failed is listed, as holder or
//     waiter, by a lock-info read that started more than Bound after the
//     failure was reported (the client gives back what a failed attempt
//     may have taken: client.Mutex.Lock);
//   - at the end, once the workers have released and closed their
//     sessions, nothing is held or queued.
type Holds struct {
	Workers int
	TTL     time.Duration // the workers' session TTL
	Bound   time.Duration // how long a failed attempt may stay listed
	Clock   func() int64  // suite clock (ns)

	mu       sync.Mutex
	attempts map[string]*holdAttempt // by owner
	sights   []holdSighting
	polls    int
	pollErrs int
	counts   map[string]int // attempt outcomes
}

// HoldsPaths are the paths the workload takes (the nemesis aims at the
// first one's shard too).
var HoldsPaths = []string{"/locks/a", "/locks/a/b", "/locks/a/c", "/locks/d/e"}

type holdAttempt struct {
	owner  string
	lease  uint64
	path   string
	failed int64 // suite time the failure was reported (0: not failed)
	err    string
}

// holdSighting is one holder or waiter seen by a lock-info read that
// started at at.
type holdSighting struct {
	at    int64
	owner string
	path  string
	token uint64
	held  bool // a holder (else a waiter)
}

func (w *Holds) init() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.attempts == nil {
		w.attempts = map[string]*holdAttempt{}
		w.counts = map[string]int{}
	}
}

// Run drives the workers and the poller until ctx ends, then has the
// workers give everything back.
func (w *Holds) Run(ctx context.Context, c *Cluster, seed int64) error {
	w.init()
	var wg sync.WaitGroup
	for k := 0; k < w.Workers; k++ {
		cl, closeCl, err := c.LinkedClient(ctx, fmt.Sprintf("holds-%d", k), k, client.WithRequestTimeout(time.Second),
			client.WithBackoff(20*time.Millisecond, 500*time.Millisecond))
		if err != nil {
			return err
		}
		defer closeCl()
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			w.worker(ctx, cl, k, rand.New(rand.NewSource(seed*104729+int64(k))))
		}(k)
	}
	poller, closePoller, err := c.LinkedClient(ctx, "holds-poller", 0, client.WithRequestTimeout(time.Second))
	if err != nil {
		return err
	}
	defer closePoller()
	for ctx.Err() == nil {
		w.poll(ctx, poller)
		sleepCtx(ctx, time.Second)
	}
	wg.Wait()
	return nil
}

func (w *Holds) worker(ctx context.Context, cl *client.Client, k int, rng *rand.Rand) {
	var s *client.Session
	defer func() {
		if s != nil {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			s.Close(cctx)
			cancel()
		}
	}()
	for n := 0; ctx.Err() == nil; n++ {
		if s == nil || s.Err() != nil {
			var err error
			if s, err = cl.NewSession(ctx, client.WithTTL(w.TTL)); err != nil {
				s = nil
				sleepCtx(ctx, 100*time.Millisecond)
				continue
			}
		}
		w.attempt(ctx, s, fmt.Sprintf("h%d-%d", k, n), HoldsPaths[rng.Intn(len(HoldsPaths))], rng)
	}
}

// attempt makes one acquire under owner and, when granted, releases it.
// One in five is a try for a lock without a session (client.Acquire, a
// single-lock lease of the session's TTL), whose failures must leave
// nothing behind either. Only tries: a session-less wait parked on a node
// that is killed stays queued until granted and then holds its lease for
// its TTL (docs/protocol.md, open points), which the bound does not allow.
func (w *Holds) attempt(ctx context.Context, s *client.Session, owner, path string, rng *rand.Rand) {
	a := &holdAttempt{owner: owner, lease: s.Lease(), path: path}
	w.mu.Lock()
	w.attempts[owner] = a
	w.mu.Unlock()
	single := rng.Intn(5) == 0
	try := single || rng.Intn(4) == 0
	lctx, cancel := ctx, context.CancelFunc(func() {})
	if !try {
		lctx, cancel = context.WithTimeout(ctx, time.Duration(50+rng.Intn(1450))*time.Millisecond)
	}
	var (
		held   context.Context
		unlock func(context.Context) error
		err    error
	)
	if single {
		var l *client.Lock
		if l, err = s.Client().Acquire(lctx, path, w.TTL, client.WithOwner(owner), client.WithTry()); err == nil {
			held, unlock = l.Context(), l.Release
		}
	} else {
		m := client.NewMutex(s, path, client.WithOwner(owner))
		if try {
			err = m.TryLock(lctx)
		} else {
			err = m.Lock(lctx)
		}
		held, unlock = m.Context(), m.Unlock
	}
	cancel()
	if err != nil {
		w.mu.Lock()
		a.failed, a.err = w.Clock(), err.Error()
		w.counts[outcomeOf(err)]++
		w.mu.Unlock()
		return
	}
	w.mu.Lock()
	w.counts["granted"]++
	w.mu.Unlock()
	select {
	case <-time.After(time.Duration(rng.Intn(200)) * time.Millisecond):
	case <-held.Done():
	}
	// Release until the service confirms (or the hold is gone anyway).
	for attempt := 0; ; attempt++ {
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := unlock(uctx)
		cancel()
		if err == nil || errors.Is(err, client.ErrNotHolder) || errors.Is(err, client.ErrStaleToken) ||
			errors.Is(err, client.ErrSessionExpired) || attempt == 20 {
			if err != nil && !errors.Is(err, client.ErrNotHolder) && !errors.Is(err, client.ErrStaleToken) &&
				!errors.Is(err, client.ErrSessionExpired) {
				w.mu.Lock()
				w.counts["release never confirmed"]++
				w.mu.Unlock()
			}
			return
		}
	}
}

// outcomeOf names a failed attempt's kind, for the counts.
func outcomeOf(err error) string {
	switch {
	case errors.Is(err, client.ErrAmbiguous):
		return "ambiguous"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	case errors.Is(err, client.ErrConflict):
		return "conflict"
	case errors.Is(err, client.ErrLockDelayed):
		return "lock-delayed"
	case errors.Is(err, client.ErrSessionExpired):
		return "session ended"
	case errors.Is(err, client.ErrCancelled):
		return "cancelled"
	case errors.Is(err, context.Canceled):
		return "stopped"
	}
	return "other"
}

// poll reads every path's lock info and records who it lists.
func (w *Holds) poll(ctx context.Context, cl *client.Client) {
	for _, p := range HoldsPaths {
		at := w.Clock()
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		info, err := cl.LockInfo(rctx, p)
		cancel()
		w.mu.Lock()
		w.polls++
		if err != nil && !errors.Is(err, client.ErrNotFound) {
			w.pollErrs++
		}
		for _, h := range info.Holders {
			w.sights = append(w.sights, holdSighting{at: at, owner: h.Owner, path: p, token: h.Token, held: true})
		}
		for _, q := range info.Waiters {
			w.sights = append(w.sights, holdSighting{at: at, owner: q.Owner, path: p})
		}
		w.mu.Unlock()
	}
}

// Check returns the broken promises: failed attempts listed past the bound,
// and whatever is still held or queued at the end (read through cl once
// the workers are done).
func (w *Holds) Check(ctx context.Context, cl *client.Client) []string {
	w.init()
	var out []string
	w.mu.Lock()
	for _, s := range w.sights {
		a := w.attempts[s.owner]
		if a == nil || a.failed == 0 || s.at <= a.failed+w.Bound.Nanoseconds() {
			continue
		}
		role := "waiter"
		if s.held {
			role = fmt.Sprintf("holder (token %d)", s.token)
		}
		out = append(out, fmt.Sprintf("attempt %s on %s failed at %.3fs (%s), and lock info read at %.3fs lists it as %s",
			s.owner, s.path, secs(a.failed), a.err, secs(s.at), role))
	}
	w.mu.Unlock()
	// Nothing at the end: every worker released and closed its session.
	deadline := time.Now().Add(w.Bound + 10*time.Second)
	for {
		left := w.leftovers(ctx, cl)
		if len(left) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			for _, l := range left {
				out = append(out, "at the end: "+l)
			}
			return out
		}
		sleepCtx(ctx, 500*time.Millisecond)
	}
}

func (w *Holds) leftovers(ctx context.Context, cl *client.Client) []string {
	var left []string
	for _, p := range HoldsPaths {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		info, err := cl.LockInfo(rctx, p)
		cancel()
		if err != nil && !errors.Is(err, client.ErrNotFound) {
			left = append(left, fmt.Sprintf("%s: lock info failed: %v", p, err))
			continue
		}
		for _, h := range info.Holders {
			left = append(left, fmt.Sprintf("%s held by %s (lease %x, token %d)", p, h.Owner, h.Lease, h.Token))
		}
		for _, q := range info.Waiters {
			left = append(left, fmt.Sprintf("%s waited for by %s (lease %x)", p, q.Owner, q.Lease))
		}
	}
	return left
}

// Summary says how many attempts there were, by outcome, and how long the
// longest-listed failed attempt stayed listed after its failure.
func (w *Holds) Summary() string {
	w.init()
	w.mu.Lock()
	defer w.mu.Unlock()
	var keys []string
	total := 0
	for k, n := range w.counts {
		keys = append(keys, k)
		total += n
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, w.counts[k]))
	}
	var longest int64
	for _, s := range w.sights {
		if a := w.attempts[s.owner]; a != nil && a.failed != 0 && s.at-a.failed > longest {
			longest = s.at - a.failed
		}
	}
	return fmt.Sprintf("%d attempts (%s); %d lock-info reads (%d failed), %d sightings; a failed attempt listed at most %.1fs after its failure (bound %v)",
		total, strings.Join(parts, ", "), w.polls, w.pollErrs, len(w.sights), secs(longest), w.Bound)
}

func secs(ns int64) float64 { return float64(ns) / 1e9 }

// checkHolds runs the workload's checks with a fresh client and reports.
func checkHolds(ctx context.Context, r *Result, c *Cluster, w *Holds) {
	cl, err := client.New(ctx, c.ClientAddrs(), client.WithRequestTimeout(5*time.Second))
	if err != nil {
		r.violate("holds: harness: %v", err)
		return
	}
	defer cl.Close()
	for _, v := range w.Check(ctx, cl) {
		r.violate("holds: %s", v)
	}
	r.note("holds: %s", w.Summary())
}
