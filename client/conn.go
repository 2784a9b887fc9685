package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wardenlock/warden/wire"
)

// conn is one handshaken connection to an endpoint. Many requests are in
// flight at once: callers register a pending call under a fresh id and queue
// the request; one writer goroutine batches queued requests into a buffered
// writer and flushes once per batch; one reader goroutine matches answers to
// pending calls by id and hands pushed frames to their stream.
type conn struct {
	addr     string
	nc       net.Conn
	cfg      *config
	info     []byte // the handshake answer's Value (a JSON node description)
	sendq    chan *call
	closed   chan struct{} // closed once the connection has failed
	nextID   atomic.Uint64
	onClosed func(*conn) // called once, after closed is closed

	mu      sync.Mutex
	err     error // why the connection failed; set once
	pending map[uint64]*call
	streams map[uint64]*stream
	wg      sync.WaitGroup

	// Request timeouts: one timer per connection, armed for the earliest
	// deadline of a pending call (a timer per request, reset, added to the
	// timer heap while its caller waited and stopped again, was a tenth of
	// a load generator's CPU). Deadlines count from epoch; guarded by mu.
	epoch    time.Time
	timeouts *time.Timer
	armed    time.Duration // deadline the timer fires at; 0: not armed
}

// call is one outstanding request on a conn: the request as sent (the
// writer encodes it from here, so sending copies it into a pooled call
// instead of a new allocation) and where its answer goes.
type call struct {
	req      wire.Request
	done     chan result   // receives exactly one result
	deadline time.Duration // when it times out, after its conn's epoch; 0: never
	// refs counts who still uses the call: its waiter, until it has
	// received the result (release), and the writer, until it has encoded
	// req (written). A connection that fails resolves calls the writer may
	// not have encoded yet, so the waiter alone cannot free it.
	refs atomic.Int32
}

// Calls are pooled (a call, its channel and a copy of the request were
// three allocations per request). Only a call whose one result has been
// received and whose request has been encoded goes back: no one sends to
// it again (whoever resolved it has let go of it, and its id was never
// reused) and no one reads its request. A call whose waiter gave up
// (forget) or whose request was never taken from the queue is left to the
// garbage collector.
var calls = sync.Pool{New: func() any { return &call{done: make(chan result, 1)} }}

func newCall(req *wire.Request) *call {
	cl := calls.Get().(*call)
	cl.req = *req
	cl.refs.Store(2)
	return cl
}

// release is the waiter letting go after it received the result.
func (cl *call) release() { cl.unref() }

// written is the writer letting go after it encoded the request.
func (cl *call) written() { cl.unref() }

func (cl *call) unref() {
	if cl.refs.Add(-1) == 0 {
		cl.req = wire.Request{} // keep no caller's strings alive in the pool
		calls.Put(cl)
	}
}

type result struct {
	resp *wire.Response
	err  error
}

// Answers are pooled for the callers inside the client that read what they
// need from one and drop it (a Mutex's grant and its release): an answer
// (375 bytes) was the client's one allocation per request. An answer that
// leaves the client (Do, watches, the typed API's results) is never
// recycled, nor one whose waiter gave up.
var responses = sync.Pool{New: func() any { return new(wire.Response) }}

// recycle gives back an answer no one references any more.
func recycle(resp *wire.Response) {
	if resp != nil {
		*resp = wire.Response{} // keep nothing it pointed to alive in the pool
		responses.Put(resp)
	}
}

const sendQueueLen = 512

// dial connects to addr and performs the handshake.
func dial(ctx context.Context, addr string, cfg *config, client uint64, onClosed func(*conn)) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.dialTimeout)
	defer cancel()
	d := net.Dialer{KeepAliveConfig: net.KeepAliveConfig{
		Enable: true, Idle: 5 * time.Second, Interval: 5 * time.Second, Count: 3}}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if cfg.tls != nil {
		tc := cfg.tls.Clone()
		if tc.ServerName == "" {
			if host, _, err := net.SplitHostPort(addr); err == nil {
				tc.ServerName = host
			}
		}
		tlsConn := tls.Client(nc, tc)
		if err := tlsConn.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, err
		}
		nc = tlsConn
	}
	cn := &conn{
		addr:     addr,
		nc:       nc,
		cfg:      cfg,
		sendq:    make(chan *call, sendQueueLen),
		closed:   make(chan struct{}),
		pending:  make(map[uint64]*call),
		streams:  make(map[uint64]*stream),
		onClosed: onClosed,
		epoch:    time.Now(),
	}
	cn.timeouts = time.AfterFunc(time.Hour, cn.expire)
	cn.timeouts.Stop()
	br := bufio.NewReaderSize(nc, 64<<10)
	if err := cn.hello(ctx, br, client); err != nil {
		nc.Close()
		return nil, err
	}
	cn.wg.Add(2)
	go cn.writeLoop()
	go cn.readLoop(br)
	return cn, nil
}

// hello sends the handshake and reads its answer before any other traffic.
func (cn *conn) hello(ctx context.Context, br *bufio.Reader, client uint64) error {
	deadline, _ := ctx.Deadline()
	cn.nc.SetDeadline(deadline)
	defer cn.nc.SetDeadline(time.Time{})
	req := wire.Request{ID: cn.nextID.Add(1), Op: wire.OpHello, Rev: wire.ProtocolVersion,
		Auth: cn.cfg.credentials, Client: client}
	frame, err := wire.AppendFrame(nil, &req)
	if err != nil {
		return err
	}
	if _, err := cn.nc.Write(frame); err != nil {
		return err
	}
	body, err := wire.ReadFrame(br, cn.cfg.maxFrame, nil)
	if err != nil {
		return err
	}
	var resp wire.Response
	if err := wire.DecodeResponse(body, &resp); err != nil {
		return err
	}
	if resp.ID != req.ID {
		return wire.Errorf(wire.Malformed, "handshake answer has id %d, want %d", resp.ID, req.ID)
	}
	if err := resp.AsError(); err != nil {
		return fmt.Errorf("client: handshake with %s refused: %w", cn.addr, err)
	}
	cn.info = resp.Value
	return nil
}

// send registers a call (and, for a watch, its stream under the same id) and
// queues the request. The caller must later receive from call.done or forget
// the id. A call not answered within timeout (0: no limit) receives
// errAttemptTimeout.
func (cn *conn) send(ctx context.Context, req *wire.Request, st *stream, timeout time.Duration) (uint64, *call, error) {
	cl := newCall(req)
	r := &cl.req
	r.ID = cn.nextID.Add(1)
	cn.cfg.leaseKeys.stamp(r)
	id := r.ID // r belongs to the writer once queued
	cl.deadline = 0
	if timeout > 0 {
		cl.deadline = time.Since(cn.epoch) + timeout
	}
	cn.mu.Lock()
	if cn.err != nil {
		cn.mu.Unlock()
		cl.release() // never registered
		cl.written() // nor queued
		return 0, nil, ErrConnLost
	}
	cn.pending[id] = cl
	if st != nil {
		cn.streams[id] = st
	}
	if cl.deadline != 0 && (cn.armed == 0 || cl.deadline < cn.armed) {
		cn.arm(cl.deadline)
	}
	cn.mu.Unlock()
	// Nearly always the queue has room: a plain send is a fraction of a
	// three-way select, which locks every channel it waits on.
	select {
	case cn.sendq <- cl:
		return id, cl, nil
	default:
	}
	select {
	case cn.sendq <- cl:
		return id, cl, nil
	case <-cn.closed:
		cn.forget(id)
		return 0, nil, ErrConnLost
	case <-ctx.Done():
		cn.forget(id)
		return 0, nil, ctx.Err()
	}
}

// roundTrip sends req and waits for its answer, at most timeout (0: no limit
// besides ctx). sent reports whether the request may have reached the server.
func (cn *conn) roundTrip(ctx context.Context, req *wire.Request, timeout time.Duration) (resp *wire.Response, sent bool, err error) {
	id, cl, err := cn.send(ctx, req, nil, timeout)
	if err != nil {
		return nil, false, err
	}
	select {
	case res := <-cl.done:
		cl.release()
		return res.resp, true, res.err
	case <-ctx.Done():
		cn.forget(id)
		return nil, true, ctx.Err()
	}
}

var errAttemptTimeout = errors.New("client: no answer within the request timeout")

// arm sets the timeout timer to fire at deadline. The caller holds mu.
func (cn *conn) arm(deadline time.Duration) {
	cn.armed = deadline
	cn.timeouts.Reset(deadline - time.Since(cn.epoch))
}

// expire answers every pending call whose deadline has passed with
// errAttemptTimeout and arms the timer for the earliest deadline left. It
// scans the pending calls, a few hundred at most, about once per timeout
// period: calls answered in time leave nothing to undo.
func (cn *conn) expire() {
	now := time.Since(cn.epoch)
	var expired []*call
	cn.mu.Lock()
	cn.armed = 0
	var next time.Duration
	for id, cl := range cn.pending {
		switch {
		case cl.deadline == 0:
		case cl.deadline <= now:
			delete(cn.pending, id)
			delete(cn.streams, id)
			expired = append(expired, cl)
		case next == 0 || cl.deadline < next:
			next = cl.deadline
		}
	}
	if next != 0 && cn.err == nil {
		cn.arm(next)
	}
	cn.mu.Unlock()
	for _, cl := range expired {
		cl.done <- result{err: errAttemptTimeout}
	}
}

// forget drops a pending call (and stream) whose answer nobody waits for.
func (cn *conn) forget(id uint64) {
	cn.mu.Lock()
	delete(cn.pending, id)
	delete(cn.streams, id)
	cn.mu.Unlock()
}

// dropStream stops routing pushes for id to its stream.
func (cn *conn) dropStream(id uint64) {
	cn.mu.Lock()
	delete(cn.streams, id)
	cn.mu.Unlock()
}

func (cn *conn) writeLoop() {
	defer cn.wg.Done()
	bw := bufio.NewWriterSize(cn.nc, 64<<10)
	var buf []byte
	// A write may take the request timeout. Moving the deadline re-arms a
	// runtime timer, so it is moved once per eighth of the timeout instead
	// of per flush, set that much further out: every write still gets at
	// least the full timeout, at most an eighth more.
	writeGrace := cn.cfg.requestTimeout + cn.cfg.requestTimeout/8
	var moveDeadline time.Time
	for {
		var cl *call
		select {
		case cl = <-cn.sendq:
		case <-cn.closed:
			return
		}
		for frames, yields := 0, 0; cl != nil; frames++ {
			req := &cl.req
			buf = wire.AppendRequestFrame(buf[:0], req)
			if n := len(buf) - wire.FrameHeaderSize; n > cn.cfg.maxFrame {
				// The server could not tell us which request it refused.
				cn.resolve(req.ID, result{err: wire.Errorf(wire.TooLarge,
					"%s request of %d bytes exceeds the frame limit of %d", req.Op, n, cn.cfg.maxFrame)})
			} else if _, err := bw.Write(buf); err != nil {
				cl.written()
				cn.fail(err)
				return
			}
			cl.written()
			select {
			case cl = <-cn.sendq:
			default:
				cl = nil
				if yields < writeYields && cn.moreComing(frames+1) {
					// Under load the callers whose answers just arrived
					// are about to send: let them, and carry their
					// requests in this write instead of one write each.
					yields++
					runtime.Gosched()
					select {
					case cl = <-cn.sendq:
					default:
					}
				}
			}
		}
		if now := time.Now(); now.After(moveDeadline) {
			cn.nc.SetWriteDeadline(now.Add(writeGrace))
			moveDeadline = now.Add(writeGrace - cn.cfg.requestTimeout)
		}
		if err := bw.Flush(); err != nil {
			cn.fail(err)
			return
		}
	}
}

// writeYields bounds how often the writer lets callers run before it
// flushes a short batch: a write syscall costs tens of times a yield.
const writeYields = 2

// moreComing reports whether more calls are outstanding than the writer has
// just batched, so more requests are likely on their way (a lone caller
// never waits for a yield).
func (cn *conn) moreComing(batched int) bool {
	cn.mu.Lock()
	n := len(cn.pending)
	cn.mu.Unlock()
	return n > batched
}

func (cn *conn) readLoop(br *bufio.Reader) {
	defer cn.wg.Done()
	var buf []byte
	for {
		body, err := wire.ReadFrame(br, cn.cfg.maxFrame, buf)
		if err != nil {
			cn.fail(err)
			return
		}
		buf = body
		resp := responses.Get().(*wire.Response)
		if err := wire.DecodeResponse(body, resp); err != nil {
			cn.fail(err)
			return
		}
		cn.dispatch(resp)
	}
}

// dispatch routes one frame: the answer to a pending call, or a push to a
// stream. The first answer to OpWatch carries the request id and goes to the
// call; later frames of the stream go to the stream whatever their id.
func (cn *conn) dispatch(resp *wire.Response) {
	cn.mu.Lock()
	cl, ok := cn.pending[resp.ID]
	if ok && resp.Code == wire.Queued {
		// An interim "waiting" notice: the final answer follows under the same id.
		cn.mu.Unlock()
		return
	}
	if ok {
		delete(cn.pending, resp.ID)
		cn.mu.Unlock()
		cl.done <- result{resp: resp}
		return
	}
	st := cn.streams[resp.Stream]
	if st != nil && resp.Code != wire.OK {
		delete(cn.streams, resp.Stream) // an error push ends the stream
	}
	cn.mu.Unlock()
	if resp.Stream == 0 || st == nil {
		return // an answer nobody waits for any more, or a push for a cancelled stream
	}
	if !st.push(resp) { // the consumer fell behind: end the stream, it resumes by revision
		cn.dropStream(resp.Stream)
		cn.wg.Add(1)
		go func() {
			defer cn.wg.Done()
			cn.unwatch(resp.Stream)
		}()
	}
}

// resolve answers one pending call locally.
func (cn *conn) resolve(id uint64, res result) {
	cn.mu.Lock()
	cl, ok := cn.pending[id]
	delete(cn.pending, id)
	cn.mu.Unlock()
	if ok {
		cl.done <- res
	}
}

// unwatch tells the server to stop a stream, best effort.
func (cn *conn) unwatch(stream uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), cn.cfg.requestTimeout)
	defer cancel()
	cn.roundTrip(ctx, &wire.Request{Op: wire.OpUnwatch, Stream: stream}, 0)
}

// fail breaks the connection: every pending call gets ErrConnLost (wrapping
// the cause) and every stream is told it ended.
func (cn *conn) fail(cause error) {
	cn.mu.Lock()
	if cn.err != nil {
		cn.mu.Unlock()
		return
	}
	cn.err = fmt.Errorf("%w: %s: %w", ErrConnLost, cn.addr, cause)
	pending, streams := cn.pending, cn.streams
	cn.pending, cn.streams = map[uint64]*call{}, map[uint64]*stream{}
	cn.timeouts.Stop()
	cn.mu.Unlock()
	close(cn.closed)
	cn.nc.Close()
	for _, cl := range pending {
		cl.done <- result{err: cn.err}
	}
	for _, st := range streams {
		st.end(cn.err)
	}
	if cn.onClosed != nil {
		cn.onClosed(cn)
	}
}

// close fails the connection with cause and waits for its goroutines.
func (cn *conn) close(cause error) {
	cn.fail(cause)
	cn.wg.Wait()
}

func (cn *conn) broken() bool {
	select {
	case <-cn.closed:
		return true
	default:
		return false
	}
}
