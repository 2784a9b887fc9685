package loadtest

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/wire"
)

// WardenOptions configure the Warden driver.
type WardenOptions struct {
	Endpoints []string
	Conns     int           // client.Client instances shared by the workers (default 4)
	Pool      int           // connections per client.Client (default 2)
	TTL       time.Duration // session TTL of the workers (default 30s)
}

// Warden drives a Warden cluster through the Go client: each worker has its
// own session; workers share Conns clients.
type Warden struct {
	opts WardenOptions
	mu   sync.Mutex
	cls  []*client.Client
}

// NewWarden connects lazily: clients are made on first use.
func NewWarden(o WardenOptions) *Warden {
	if o.Conns <= 0 {
		o.Conns = 4
	}
	if o.Pool <= 0 {
		o.Pool = 2
	}
	if o.TTL <= 0 {
		o.TTL = 30 * time.Second
	}
	return &Warden{opts: o}
}

func (d *Warden) Name() string { return "warden" }

// clientFor returns the shared client worker i uses.
func (d *Warden) clientFor(ctx context.Context, i int) (*client.Client, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cls == nil {
		d.cls = make([]*client.Client, d.opts.Conns)
	}
	k := i % len(d.cls)
	if d.cls[k] == nil {
		c, err := client.New(ctx, d.opts.Endpoints, client.WithPoolSize(d.opts.Pool),
			client.WithRequestTimeout(10*time.Second))
		if err != nil {
			return nil, err
		}
		d.cls[k] = c
	}
	return d.cls[k], nil
}

func (d *Warden) NewClient(ctx context.Context, worker int) (Client, error) {
	c, err := d.clientFor(ctx, worker)
	if err != nil {
		return nil, err
	}
	s, err := c.NewSession(ctx, client.WithTTL(d.opts.TTL))
	if err != nil {
		return nil, err
	}
	return &wardenClient{c: c, s: s}, nil
}

func (d *Warden) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.cls {
		if c != nil {
			_ = c.Close()
		}
	}
	d.cls = nil
	return nil
}

func (d *Warden) ErrorCode(err error) string {
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Code.String()
	}
	return genericCode(err)
}

func (d *Warden) Version(context.Context) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "warden " + s.Value[:12]
			}
		}
	}
	return "warden (dev)"
}

// KeepSessions opens n sessions spread over the driver's clients; the client
// keeps each alive at TTL/3.
func (d *Warden) KeepSessions(ctx context.Context, n int, ttl time.Duration, progress func()) (func() int, func(), error) {
	ss := make([]*client.Session, n)
	var next, failed atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for w := 0; w < 256; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				c, err := d.clientFor(ctx, i)
				if err == nil {
					ss[i], err = c.NewSession(ctx, client.WithTTL(ttl))
				}
				if err != nil {
					// One slow creation is a figure (failed), not a reason to stop.
					if failed.Add(1) > int64(n/100+10) {
						once.Do(func() { firstErr = fmt.Errorf("session %d: %w (%d failed)", i, err, failed.Load()) })
						return
					}
					continue
				}
				progress()
			}
		}()
	}
	wg.Wait()
	alive := func() int {
		k := 0
		for _, s := range ss {
			if s != nil && s.Err() == nil {
				k++
			}
		}
		return k
	}
	stop := func() {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 256)
		for _, s := range ss {
			if s == nil {
				continue
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_ = s.Close(cctx)
				cancel()
			}()
		}
		wg.Wait()
	}
	if firstErr != nil {
		stop()
		return nil, nil, firstErr
	}
	return alive, stop, nil
}

// wardenClient is one worker's session (the held scenario shares it
// between goroutines).
type wardenClient struct {
	c *client.Client
	s *client.Session
	// A worker cycling over a few paths keeps one Mutex per path (a Mutex
	// can be locked again once unlocked): a new one per cycle was five
	// allocations and a random owner name. Bounded, for scenarios that
	// lock many distinct paths.
	mu  sync.Mutex
	mus map[string]*cachedMutex
}

const cachedMutexes = 64

// cachedMutex is a worker's Mutex on one path, locked over and over. A
// lock or a release that was not confirmed leaves the Mutex possibly
// held: the next cycle starts from a fresh one.
type cachedMutex struct {
	s    *client.Session
	path string
	m    *client.Mutex
}

func (h *cachedMutex) Lock(ctx context.Context) (Held, error) {
	if err := h.m.Lock(ctx); err != nil {
		h.m = client.NewMutex(h.s, h.path)
		return nil, err
	}
	return h, nil
}

func (h *cachedMutex) Unlock(ctx context.Context) error {
	err := h.m.Unlock(ctx)
	if err != nil {
		h.m = client.NewMutex(h.s, h.path)
	}
	return err
}

func (w *wardenClient) mutex(path string) *cachedMutex {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.mus[path]
	if h == nil {
		h = &cachedMutex{s: w.s, path: path, m: client.NewMutex(w.s, path)}
		if w.mus == nil {
			w.mus = map[string]*cachedMutex{}
		}
		if len(w.mus) < cachedMutexes {
			w.mus[path] = h
		}
	}
	return h
}

func (w *wardenClient) Lock(ctx context.Context, path string) (Held, error) {
	return w.mutex(path).Lock(ctx)
}

// Locker prepares path's Mutex once, for a worker that locks it over and
// over (PathLocker): no lookup per cycle.
func (w *wardenClient) Locker(path string) Locker { return w.mutex(path) }

func (w *wardenClient) LockAll(ctx context.Context, paths []string) (Held, error) {
	h := fnv.New32a()
	h.Write([]byte(paths[0]))
	owner := fmt.Sprintf("%016x-%06x", w.s.Lease(), h.Sum32()&0xffffff)
	m, err := client.LockAll(ctx, w.s, paths, client.WithOwner(owner))
	if errors.Is(err, client.ErrSelfConflict) {
		// This owner already holds them: an earlier attempt that failed
		// as ambiguous did apply. Closing the session releases them.
		return unlockFunc(func(context.Context) error { return nil }), nil
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (w *wardenClient) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return w.s.Close(ctx)
}

type unlockFunc func(ctx context.Context) error

func (f unlockFunc) Unlock(ctx context.Context) error { return f(ctx) }

func (w *wardenClient) Campaign(ctx context.Context, path, value string) (Held, error) {
	e := client.NewElection(w.s, path)
	if err := e.Campaign(ctx, []byte(value)); err != nil {
		return nil, err
	}
	return unlockFunc(e.Resign), nil
}

func (w *wardenClient) WatchReleases(ctx context.Context, path string, out chan<- time.Time) error {
	ch := w.c.Watch(ctx, path)
	go func() {
		for wr := range ch {
			now := time.Now()
			for _, ev := range wr.Events {
				if ev.Kind == wire.EvReleased {
					select {
					case out <- now:
					default: // a slow consumer loses samples, never blocks the watch
					}
				}
			}
		}
	}()
	return nil
}
