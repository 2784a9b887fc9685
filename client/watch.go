package client

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/wardenlock/warden/wire"
)

// Event is one change reported by a watch. Rev numbers the change within its
// shard (Shard); Cause says why a lock or lease ended.
type Event = wire.Event

// WatchResponse is one batch of events, in revision order per shard, or the
// error that ended the watch (then the channel closes).
type WatchResponse struct {
	Events []Event
	Err    error
	// Position (prefix watches) is where the watch stands after this
	// batch: resume from it with WithWatchPosition.
	Position Position
}

// maxStreamQueue bounds the pushed frames a stream buffers for a slow
// consumer; past it the stream is dropped and later resumed by revision.
const maxStreamQueue = 1024

var errStreamOverflow = errors.New("client: watch consumer fell behind")

// stream buffers the frames pushed for one watch subscription on one
// connection. The reader goroutine never blocks on it.
type stream struct {
	mu     sync.Mutex
	frames []*wire.Response
	ended  error
	notify chan struct{} // one-slot wake-up
}

func newStream() *stream { return &stream{notify: make(chan struct{}, 1)} }

// push queues a frame; false means the queue overflowed and the stream ended.
func (st *stream) push(r *wire.Response) bool {
	st.mu.Lock()
	ok := st.ended == nil && len(st.frames) < maxStreamQueue
	if ok {
		st.frames = append(st.frames, r)
	} else if st.ended == nil {
		st.ended = errStreamOverflow
	}
	st.mu.Unlock()
	st.wake()
	return ok
}

// end marks the stream finished (connection lost).
func (st *stream) end(err error) {
	st.mu.Lock()
	if st.ended == nil {
		st.ended = err
	}
	st.mu.Unlock()
	st.wake()
}

func (st *stream) wake() {
	select {
	case st.notify <- struct{}{}:
	default:
	}
}

// take returns the queued frames and, once they are all taken, why the
// stream ended (nil while it runs).
func (st *stream) take() ([]*wire.Response, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	f := st.frames
	st.frames = nil
	return f, st.ended
}

// Watch follows path (or, with WithPrefix, every path under it) and sends
// batches of events on the returned channel, from now, from WithRev(rev) or
// from WithWatchPosition(p). When the connection breaks or the consumer
// falls behind it resubscribes from where it stood, so no event is missed or
// repeated. It ends, closing the channel, when ctx ends or after a
// WatchResponse with Err: a *CompactedError (ErrCompacted) when a shard no
// longer retains the revisions it needs, or another non-retryable error.
//
// Revisions are per shard. A prefix watch follows its subtree on every
// shard, across range moves: each shard's events arrive in revision order,
// with no order between shards (docs/protocol.md §4.6). Its Position, a
// revision per shard, is in every WatchResponse. WithRev applies to a
// single path, or to a prefix held by one shard.
func (c *Client) Watch(ctx context.Context, path string, opts ...OpOption) <-chan WatchResponse {
	o := applyOps(opts)
	out := make(chan WatchResponse, 1)
	w := &watcher{c: c, out: out, last: map[uint64]uint64{}, next: o.rev, prefix: o.prefix,
		req: wire.Request{Op: wire.OpWatch, Path: path, Flags: o.flags() &^ (wire.FlagStale | wire.FlagHasExpect)}}
	for _, e := range o.position {
		w.last[e.Shard] = e.Rev
	}
	if len(o.position) > 0 && !o.prefix {
		out <- WatchResponse{Err: fmt.Errorf("%w: a watch position resumes a prefix watch (WithPrefix); a path resumes WithRev", ErrInvalidArgument)}
		close(out)
		return out
	}
	if !c.goBackground(func() { w.run(ctx) }) {
		out <- WatchResponse{Err: ErrClientClosed}
		close(out)
	}
	return out
}

type watcher struct {
	c      *Client
	out    chan WatchResponse
	req    wire.Request
	prefix bool              // a prefix watch: it resumes from its position (last)
	next   uint64            // revision to (re)subscribe from; 0 = now
	last   map[uint64]uint64 // per shard: last revision delivered (a prefix watch's position)
}

func (w *watcher) run(ctx context.Context) {
	defer close(w.out)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(w.c.ctx, cancel)
	defer stop()
	for attempt := 0; ; attempt++ {
		cn, id, st, err := w.subscribe(ctx)
		if err == nil {
			attempt = 0
			err = w.pump(ctx, cn, id, st)
		}
		if ctx.Err() != nil {
			return
		}
		if !resumable(err) {
			w.deliver(ctx, WatchResponse{Err: err})
			return
		}
		w.c.cfg.logger.Debug("warden: watch resubscribing", "path", w.req.Path, "rev", w.next, "err", err)
		if w.c.cfg.backoff.Wait(ctx, attempt) != nil {
			return
		}
	}
}

// resumable reports whether a watch that ended with err should subscribe
// again.
func resumable(err error) bool {
	return errors.Is(err, ErrConnLost) || errors.Is(err, errAttemptTimeout) ||
		errors.Is(err, errStreamOverflow) || IsRetryable(err)
}

// subscribe opens a stream from w.next and waits for its first answer.
func (w *watcher) subscribe(ctx context.Context) (*conn, uint64, *stream, error) {
	cn, err := w.c.pool.pick(ctx)
	if err != nil {
		return nil, 0, nil, err
	}
	req := w.req
	req.Rev = w.next // a server that does not know Position resumes by it
	if w.prefix && len(w.last) > 0 {
		req.Position = positionOf(w.last) // which then takes precedence
	}
	st := newStream()
	id, cl, err := cn.send(&req, st, 0)
	if err != nil {
		return nil, 0, nil, err
	}
	var res result
	select {
	case res = <-cl.done:
	case <-ctx.Done():
		cn.forget(id)
		cn.unwatch(id)
		return nil, 0, nil, ctx.Err()
	}
	if res.err == nil {
		res.err = res.resp.AsError()
	}
	if res.err != nil {
		cn.dropStream(id)
		return nil, 0, nil, res.err
	}
	if w.next == 0 {
		w.next = res.resp.Rev + 1
	}
	if len(res.resp.Events) > 0 || len(res.resp.Position) > 0 {
		st.mu.Lock()
		if len(res.resp.Events) > 0 {
			st.frames = append([]*wire.Response{{Events: res.resp.Events}}, st.frames...)
		}
		if len(res.resp.Position) > 0 {
			// The start position counts once the events pushed before the
			// answer (a replay up to it) are delivered.
			st.frames = append(st.frames, &wire.Response{Position: res.resp.Position})
		}
		st.mu.Unlock()
		st.wake()
	}
	return cn, id, st, nil
}

// pump delivers the stream's frames until it ends or ctx ends.
func (w *watcher) pump(ctx context.Context, cn *conn, id uint64, st *stream) error {
	for {
		select {
		case <-st.notify:
		case <-ctx.Done():
			cn.dropStream(id)
			cn.unwatch(id)
			return ctx.Err()
		}
		frames, ended := st.take()
		for _, f := range frames {
			if err := f.AsError(); err != nil {
				if f.Code == wire.TooMany {
					// The server dropped a consumer that fell behind: resume by revision.
					return fmt.Errorf("%w: %w", errStreamOverflow, err)
				}
				return err
			}
			w.advance(f.Position)
			if evs := w.fresh(f.Events); len(evs) > 0 {
				r := WatchResponse{Events: evs}
				if w.prefix {
					r.Position = positionOf(w.last)
				}
				if !w.deliver(ctx, r) {
					return ctx.Err()
				}
			}
		}
		if ended != nil && len(frames) == 0 {
			return ended
		}
		if ended != nil {
			st.wake() // come back for the end after the frames
		}
	}
}

// fresh drops events already delivered (a resubscription may replay some)
// and advances the resume revision.
func (w *watcher) fresh(evs []Event) []Event {
	out := evs[:0:0]
	for _, e := range evs {
		if last, seen := w.last[e.Shard]; seen && e.Rev <= last {
			continue
		}
		w.last[e.Shard] = e.Rev
		out = append(out, e)
	}
	if len(out) == 0 {
		return nil
	}
	next := uint64(0)
	for _, last := range w.last {
		if next == 0 || last+1 < next {
			next = last + 1
		}
	}
	w.next = next
	return out
}

// advance takes a stream's start position: every event up to it on each
// shard has been delivered (or precedes the watch).
func (w *watcher) advance(p []wire.ShardRev) {
	for _, e := range p {
		if last, seen := w.last[e.Shard]; !seen || e.Rev > last {
			w.last[e.Shard] = e.Rev
		}
	}
}

func (w *watcher) deliver(ctx context.Context, r WatchResponse) bool {
	select {
	case w.out <- r:
		return true
	case <-ctx.Done():
		return false
	}
}
