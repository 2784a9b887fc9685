package client

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/wardenlock/warden/wire"
)

// How a holder learns that the service ended its hold. Every hold a session
// has (a Mutex's or RWMutex's grant, a Permit, a MultiLock's paths, an
// Election's leadership) is registered with its session under its path and
// token, and every Lock (a single-lock lease) with its client. The service
// tells the client of every end it did not ask for (a revocation at its
// deadline, an admin's resign, release or hand-over, the lease's expiry or
// revocation: wire.Event.TellsHolder) in two ways: pushed on each
// connection's hold stream (OpHolds) as soon as a replica applies it, and,
// for the notices a push could miss (a broken connection), in the answers
// to the session's keepalives. Either way the hold's context ends with a
// *HoldLostError, IsHeld turns false, and the next Unlock says so. A notice
// that arrives twice, or for a hold already given back, changes nothing. A
// Lock has no keepalives: a push it missed, its next Renew reports.

// ErrHoldLost matches every *HoldLostError.
var ErrHoldLost = errors.New("client: hold lost")

// HoldLostError is the cause (context.Cause) of a hold's context when the
// service ended the hold without the holder asking: Cause says how
// (wire.CauseForced: revoked at its revocation deadline; CauseResigned,
// CauseReleased, CauseHandover: another client resigned, released or
// handed over the hold; for a Lock, CauseExpired and CauseRevoked: its own
// lease expired, here or in the service, or was revoked). A hold that ends
// with its session has the session's cause instead (matching
// ErrSessionExpired).
type HoldLostError struct {
	Path  string
	Token uint64
	Cause wire.Cause
}

func (e *HoldLostError) Error() string {
	what := e.Cause.String()
	switch e.Cause {
	case wire.CauseForced:
		what = "revoked at its revocation deadline"
	case wire.CauseReleased:
		what = "released by another client"
	case wire.CauseResigned:
		what = "resigned by another client"
	case wire.CauseHandover:
		what = "handed over by another client"
	case wire.CauseExpired:
		what = "its lease expired (not renewed within its TTL)"
	case wire.CauseRevoked:
		what = "its lease was revoked"
	}
	return fmt.Sprintf("client: hold of %s (token %d) lost: %s", e.Path, e.Token, what)
}

// Is makes every HoldLostError match ErrHoldLost.
func (e *HoldLostError) Is(target error) bool { return target == ErrHoldLost }

// heldHold is one registered hold: told when the service ends it.
type heldHold interface {
	holdLost(token uint64, cause error)
}

// heldEntry is one registered hold. Tokens are unique per shard, not
// across shards, so an entry also names its path; entries of one token on
// several paths (several shards) are chained.
type heldEntry struct {
	path string
	h    heldHold
	next *heldEntry
}

// heldSet is a session's registry of holds, by token (an integer key: a
// lock cycle registers and drops one, and hashing a path cost more). A
// notice can overtake the grant it ends (a revocation right after the
// grant, pushed while the grant's answer is on its way): notices that find
// no hold are kept for a while, and a hold registered later that they name
// is told at once.
type heldSet struct {
	mu      sync.Mutex
	m       map[uint64]heldEntry
	pending []*HoldLostError // notices that found no hold yet, newest last
}

// maxPendingNotices bounds the notices kept for holds not registered yet.
const maxPendingNotices = 64

func (hs *heldSet) add(path string, token uint64, h heldHold) {
	hs.mu.Lock()
	for i, p := range hs.pending {
		if p.Token == token && p.Path == path {
			hs.pending = append(hs.pending[:i], hs.pending[i+1:]...)
			hs.mu.Unlock()
			h.holdLost(token, p)
			return
		}
	}
	if hs.m == nil {
		hs.m = map[uint64]heldEntry{}
	}
	e := heldEntry{path: path, h: h}
	if old, ok := hs.m[token]; ok { // the same token on another shard's path: rare
		e.next = new(heldEntry)
		*e.next = old
	}
	hs.m[token] = e
	hs.mu.Unlock()
}

func (hs *heldSet) remove(path string, token uint64, h heldHold) {
	hs.mu.Lock()
	hs.unlink(token, path, h)
	hs.mu.Unlock()
}

// unlink drops the entry of token on path (of h, when h is not nil) and
// returns its hold (nil: none). Called with hs.mu held.
func (hs *heldSet) unlink(token uint64, path string, h heldHold) heldHold {
	e, ok := hs.m[token]
	if !ok {
		return nil
	}
	if e.path == path && (h == nil || e.h == h) {
		if e.next == nil {
			delete(hs.m, token)
		} else {
			hs.m[token] = *e.next
		}
		return e.h
	}
	for prev := &e; prev.next != nil; prev = prev.next {
		if x := prev.next; x.path == path && (h == nil || x.h == h) {
			prev.next = x.next
			hs.m[token] = e
			return x.h
		}
	}
	return nil
}

// take removes and returns the hold lost names; with none registered, it
// keeps the notice for a hold registered later.
func (hs *heldSet) take(lost *HoldLostError) heldHold {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if h := hs.unlink(lost.Token, lost.Path, nil); h != nil {
		return h
	}
	hs.keepPending(lost)
	return nil
}

// keepPending keeps a notice that found no hold (once: keepalive answers
// repeat notices), dropping the oldest past the bound.
func (hs *heldSet) keepPending(lost *HoldLostError) {
	for _, p := range hs.pending {
		if p.Token == lost.Token && p.Path == lost.Path {
			return
		}
	}
	if len(hs.pending) == maxPendingNotices {
		hs.pending = hs.pending[1:]
	}
	hs.pending = append(hs.pending, lost)
}

// noticed acts on notices from the service: a hold ended (its registered
// holder is told) or a session lease ended (the session is lost). It never
// blocks: it runs on a connection's reader. The service sends only notices
// (wire.Event.TellsHolder), and may have cleared the Client of the request
// that ended a hold (another identity's): only the kind is checked here.
func (c *Client) noticed(events []wire.Event) {
	for i := range events {
		ev := &events[i]
		if ev.Kind != wire.EvReleased && ev.Kind != wire.EvLeaseEnd || ev.Cause == wire.CauseMoved {
			continue
		}
		if wire.SingleLease(ev.Lease) {
			if ev.Kind == wire.EvReleased {
				c.lost(&c.singles, ev)
			}
			continue
		}
		s := c.sessionOf(ev.Lease)
		if s == nil {
			continue
		}
		if ev.Kind == wire.EvLeaseEnd {
			cause := wire.Errorf(wire.SessionExpired, "lease %x ended: %s", s.lease, ev.Cause)
			go s.stop(Lost, cause) // stop waits for a keepalive in flight, whose answer this reader carries
			continue
		}
		c.lost(&s.held, ev)
	}
}

// lost tells the hold of hs that ev ended it (or keeps the notice for a
// hold whose grant is still on its way).
func (c *Client) lost(hs *heldSet, ev *wire.Event) {
	lost := &HoldLostError{Path: ev.Path, Token: ev.Token, Cause: ev.Cause}
	if h := hs.take(lost); h != nil {
		c.cfg.logger.Warn("warden: hold lost", "path", ev.Path, "token", ev.Token, "cause", ev.Cause.String())
		h.holdLost(ev.Token, lost)
	}
}

// holdSink receives a connection's hold stream.
type holdSink struct{ c *Client }

func (hs holdSink) push(r *wire.Response) bool {
	if r.Code == wire.OK {
		hs.c.noticed(r.Events)
	}
	return true
}

func (holdSink) end(error) {} // the keepalive answers carry what a broken stream missed

// openHolds opens cn's hold stream. It is queued before any other request
// of the connection, so the keepalives sent on it register their leases.
// A server that does not know OpHolds answers an error and pushes nothing:
// the keepalive answers still carry the notices.
func (cn *conn) openHolds(sink streamSink) {
	id, cl, err := cn.send(&wire.Request{Op: wire.OpHolds}, sink, 0)
	if err != nil {
		return
	}
	cn.wg.Add(1)
	go func() {
		defer cn.wg.Done()
		res := <-cl.done
		cl.release()
		if res.err == nil && res.resp.Code != wire.OK {
			cn.dropStream(id)
		}
	}()
}

// holdLife is the context of a hold that lives from its grant until it is
// given back, lost, or its session ends.
type holdLife struct {
	mu     sync.Mutex
	s      *Session
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func (l *holdLife) start(s *Session) {
	l.mu.Lock()
	l.s = s
	l.ctx, l.cancel = context.WithCancelCause(s.ctx)
	l.mu.Unlock()
}

func (l *holdLife) end(cause error) {
	l.mu.Lock()
	if l.cancel != nil {
		l.cancel(cause)
	}
	l.mu.Unlock()
}

func (l *holdLife) context() context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(ErrReleased)
		return ctx
	}
	return l.ctx
}

// held reports whether the hold lives: not ended, and its session alive by
// the client's clock.
func (l *holdLife) held() bool {
	l.mu.Lock()
	s := l.s
	l.mu.Unlock()
	return l.context().Err() == nil && s.Err() == nil
}

// err is why the hold ended (nil while it lives).
func (l *holdLife) err() error {
	ctx := l.context()
	if ctx.Err() == nil {
		return nil
	}
	return context.Cause(ctx)
}
