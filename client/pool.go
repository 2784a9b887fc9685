package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// pool keeps cfg.poolSize connections, each slot reconnecting on its own with
// full-jitter backoff and moving to the next endpoint on every attempt, so a
// dead endpoint is failed over without any bookkeeping of which one is dead.
type pool struct {
	cfg       *config
	endpoints []string
	clientID  uint64
	holds     streamSink      // each connection's hold stream goes here (held.go)
	ctx       context.Context // cancelled by Client.Close
	wg        sync.WaitGroup  // reconnect loops

	rr atomic.Uint64
	// slots hold the live connections (nil while a slot reconnects). They
	// are written under mu and read without it: every request picks one,
	// and the workers of a busy client queued on mu to do so.
	slots   []atomic.Pointer[conn]
	mu      sync.Mutex
	next    []int         // per slot: index of the next endpoint to try
	wake    chan struct{} // closed and replaced whenever a slot connects
	last    error         // the most recent dial failure
	closing bool          // set by close: no more reconnect loops
}

func newPool(ctx context.Context, cfg *config, endpoints []string, clientID uint64, holds streamSink) *pool {
	p := &pool{cfg: cfg, endpoints: endpoints, clientID: clientID, holds: holds, ctx: ctx,
		slots: make([]atomic.Pointer[conn], cfg.poolSize), next: make([]int, cfg.poolSize),
		wake: make(chan struct{})}
	for i := range p.next {
		p.next[i] = i % len(endpoints)
	}
	return p
}

// connectFirst fills slot 0, trying each endpoint once, so New can report an
// unreachable cluster or refused credentials; the other slots connect in the
// background.
func (p *pool) connectFirst(ctx context.Context) error {
	var errs []error
	for range p.endpoints {
		cn, err := p.dialSlot(ctx, 0)
		if err == nil {
			p.install(0, cn)
			for i := 1; i < len(p.slots); i++ {
				p.startReconnect(i)
			}
			return nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("%w: %w", ErrNoEndpoint, errors.Join(errs...))
}

// dialSlot dials the slot's next endpoint and advances the rotation.
func (p *pool) dialSlot(ctx context.Context, i int) (*conn, error) {
	p.mu.Lock()
	addr := p.endpoints[p.next[i]]
	p.next[i] = (p.next[i] + 1) % len(p.endpoints)
	p.mu.Unlock()
	cn, err := dial(ctx, addr, p.cfg, p.clientID, func(cn *conn) { p.lost(i, cn) })
	if err != nil {
		err = fmt.Errorf("%s: %w", addr, err)
		p.mu.Lock()
		p.last = err
		p.mu.Unlock()
		return nil, err
	}
	if p.holds != nil {
		cn.openHolds(p.holds) // before the keepalives this connection will carry
	}
	return cn, nil
}

// install puts a fresh connection into slot i and wakes waiters.
func (p *pool) install(i int, cn *conn) {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		cn.close(ErrClientClosed)
		return
	}
	p.slots[i].Store(cn)
	close(p.wake)
	p.wake = make(chan struct{})
	p.mu.Unlock()
	p.cfg.logger.Debug("warden: connected", "endpoint", cn.addr, "slot", i)
	if cn.broken() { // failed before onClosed was set
		p.lost(i, cn)
	}
}

// lost empties slot i if it still holds cn and starts reconnecting it.
func (p *pool) lost(i int, cn *conn) {
	p.mu.Lock()
	if p.slots[i].Load() != cn {
		p.mu.Unlock()
		return
	}
	p.slots[i].Store(nil)
	p.mu.Unlock()
	if !p.isClosing() {
		p.cfg.logger.Warn("warden: connection lost", "endpoint", cn.addr, "err", cn.err)
		p.startReconnect(i)
	}
}

func (p *pool) startReconnect(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for attempt := 0; ; attempt++ {
			if attempt > 0 && p.cfg.backoff.Wait(p.ctx, attempt-1) != nil {
				return
			}
			cn, err := p.dialSlot(p.ctx, i)
			if err == nil {
				p.install(i, cn)
				return
			}
			if p.ctx.Err() != nil {
				return
			}
			p.cfg.logger.Debug("warden: reconnect failed", "slot", i, "attempt", attempt, "err", err)
		}
	}()
}

// pick returns a live connection, round robin, waiting for a reconnect when
// there is none.
func (p *pool) pick(ctx context.Context) (*conn, error) {
	for {
		if cn := p.live(""); cn != nil {
			return cn, nil
		}
		p.mu.Lock()
		// A slot connected meanwhile has closed the wake channel read
		// before: install stores the slot and replaces wake under mu.
		if cn := p.live(""); cn != nil {
			p.mu.Unlock()
			return cn, nil
		}
		wake, last := p.wake, p.last
		p.mu.Unlock()
		select {
		case <-wake:
		case <-p.ctx.Done():
			return nil, ErrClientClosed
		case <-ctx.Done():
			if last != nil {
				return nil, fmt.Errorf("%w (last error: %w): %w", ErrNoEndpoint, last, ctx.Err())
			}
			return nil, ctx.Err()
		}
	}
}

// close shuts every connection and waits for the reconnect loops. The
// caller has already cancelled p.ctx.
func (p *pool) close() {
	p.mu.Lock()
	p.closing = true
	conns := make([]*conn, len(p.slots))
	for i := range p.slots {
		conns[i] = p.slots[i].Load()
	}
	p.mu.Unlock()
	p.wg.Wait()
	for _, cn := range conns {
		if cn != nil {
			cn.close(ErrClientClosed)
		}
	}
}

func (p *pool) isClosing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closing
}

// live returns a live connection, round robin, to an endpoint other than
// avoid (any endpoint when avoid is empty), or nil when there is none.
func (p *pool) live(avoid string) *conn {
	n := len(p.slots)
	start := int(p.rr.Add(1))
	for k := 0; k < n; k++ {
		if cn := p.slots[(start+k)%n].Load(); cn != nil && !cn.broken() && (avoid == "" || cn.addr != avoid) {
			return cn
		}
	}
	return nil
}
