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
// flight at once: a caller registers a pending call under a fresh id,
// encodes its request and appends the frame to the connection's outgoing
// buffer; one writer goroutine writes what has gathered there in one
// syscall; one reader goroutine matches answers to pending calls by id and
// hands pushed frames to their stream. A caller alone on an idle
// connection writes its frame itself, saving the hand-off to the writer.
type conn struct {
	addr     string
	nc       net.Conn
	cfg      *config
	info     []byte        // the handshake answer's Value (a JSON node description)
	closed   chan struct{} // closed once the connection has failed
	nextID   atomic.Uint64
	onClosed func(*conn) // called once, after closed is closed

	// Outgoing frames, in the order callers appended them. The socket has
	// one owner at a time (writing): the writer goroutine, from the wake
	// that made it the owner until it finds out empty, or a caller alone
	// on the connection writing its own frame. Frames appended while the
	// socket has an owner are its to write.
	wmu     sync.Mutex
	out     []byte
	outN    int           // frames in out
	writing bool          // the socket has an owner
	wake    chan struct{} // one slot: makes the writer goroutine the owner
	direct  atomic.Uint64 // frames written by their caller (for tests)
	// Write deadlines, used by the socket's owner only: moving one re-arms
	// a runtime timer, so it is moved once per eighth of the request
	// timeout, set that much further out: every write still gets at least
	// the full timeout, at most an eighth more.
	writeGrace   time.Duration
	moveDeadline time.Time

	mu      sync.Mutex
	err     error // why the connection failed; set once
	pending map[uint64]*call
	streams map[uint64]streamSink
	wg      sync.WaitGroup

	// Request timeouts: one timer per connection, armed for the earliest
	// deadline of a pending call (a timer per request, reset, added to the
	// timer heap while its caller waited and stopped again, was a tenth of
	// a load generator's CPU). Deadlines count from epoch; guarded by mu.
	epoch    time.Time
	timeouts *time.Timer
	armed    time.Duration // deadline the timer fires at; 0: not armed
}

// streamSink takes the frames pushed on one stream of a conn (a watch's
// queue, the hold stream's notices). push runs on the reader and must not
// block; false ends the stream. end tells it the connection broke.
type streamSink interface {
	push(*wire.Response) bool
	end(error)
}

// call is one outstanding request on a conn: where its answer goes, and
// the request's frame while its caller encodes and queues it.
type call struct {
	done     chan result   // receives exactly one result
	deadline time.Duration // when it times out, after its conn's epoch; 0: never
	frame    []byte
}

// Calls are pooled (a call and its channel were two allocations per
// request). Only a call whose one result has been received goes back: no
// one sends to it again (whoever resolved it has let go of it, and its id
// was never reused), and its frame was copied out or written before send
// returned. A call whose waiter gave up (forget) is left to the garbage
// collector.
var calls = sync.Pool{New: func() any { return &call{done: make(chan result, 1)} }}

// maxPooledFrame bounds the frame buffer a pooled call keeps.
const maxPooledFrame = 4 << 10

// release is the waiter letting go after it received the result.
func (cl *call) release() {
	if cap(cl.frame) > maxPooledFrame {
		cl.frame = nil
	}
	calls.Put(cl)
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
			var rhe tls.RecordHeaderError
			if errors.As(err, &rhe) {
				return nil, fmt.Errorf("client: %s did not answer in TLS (a plaintext port? connect without TLS): %w", addr, err)
			}
			return nil, err
		}
		nc = tlsConn
	}
	cn := &conn{
		addr:     addr,
		nc:       nc,
		cfg:      cfg,
		closed:   make(chan struct{}),
		wake:     make(chan struct{}, 1),
		pending:  make(map[uint64]*call),
		streams:  make(map[uint64]streamSink),
		onClosed: onClosed,
		epoch:    time.Now(),
		// See moveDeadline.
		writeGrace: cfg.requestTimeout + cfg.requestTimeout/8,
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
	if fe := (*wire.FrameSizeError)(nil); errors.As(err, &fe) && tlsRecord(fe.Size) {
		return fmt.Errorf("client: %s answered in TLS (its port expects TLS: connect with TLS): %w", cn.addr, err)
	}
	if err != nil {
		return err
	}
	var resp wire.Response
	if err := wire.DecodeResponse(body, &resp); err != nil {
		return err
	}
	if resp.ID == 0 && resp.Code != wire.OK {
		// Refused before the hello was read (a per-address connection
		// limit, a port that expects TLS): the server's own reason.
		return fmt.Errorf("client: %s refused the connection: %w", cn.addr, resp.AsError())
	}
	if resp.ID != req.ID {
		return wire.Errorf(wire.Malformed, "handshake answer has id %d, want %d", resp.ID, req.ID)
	}
	if err := resp.AsError(); err != nil {
		return fmt.Errorf("client: handshake with %s refused: %w", cn.addr, err)
	}
	cn.info = resp.Value
	cn.cfg.ttlLimits.learn(resp.Value)
	return nil
}

// tlsRecord reports whether a frame length read from the server is the
// start of a TLS record (an alert or a handshake, version 3.x).
func tlsRecord(size int) bool {
	kind, major := size>>24, size>>16&0xff
	return (kind == 0x15 || kind == 0x16) && major == 0x03
}

// send registers a call (and, for a watch, its stream under the same id)
// and queues the request: its frame is in the connection's outgoing buffer
// (or written) when send returns, so requests one goroutine sends on a
// connection go out in that order. The caller must later receive from
// call.done or forget the id. A call not answered within timeout (0: no
// limit) receives errAttemptTimeout. send never blocks on the socket,
// except for a caller alone on the connection, which writes its frame
// itself (bounded by the write deadline).
func (cn *conn) send(req *wire.Request, st streamSink, timeout time.Duration) (uint64, *call, error) {
	cl := calls.Get().(*call)
	id := cn.nextID.Add(1)
	// The id and the lease key go into the frame, not into the caller's
	// request, which it may send again on another connection.
	savedID, savedKey := req.ID, req.LeaseKey
	req.ID = id
	cn.cfg.leaseKeys.stamp(req)
	cl.frame = wire.AppendRequestFrame(cl.frame[:0], req)
	req.ID, req.LeaseKey = savedID, savedKey
	if n := len(cl.frame) - wire.FrameHeaderSize; n > cn.cfg.maxFrame {
		// Refused here: the server could not tell us which request it refused.
		cl.release()
		return 0, nil, wire.Errorf(wire.TooLarge,
			"%s request of %d bytes exceeds the frame limit of %d", req.Op, n, cn.cfg.maxFrame)
	}
	cl.deadline = 0
	if timeout > 0 {
		cl.deadline = time.Since(cn.epoch) + timeout
	}
	cn.mu.Lock()
	if cn.err != nil {
		cn.mu.Unlock()
		cl.release() // never registered
		return 0, nil, ErrConnLost
	}
	cn.pending[id] = cl
	alone := len(cn.pending) == 1
	if st != nil {
		cn.streams[id] = st
	}
	if cl.deadline != 0 && (cn.armed == 0 || cl.deadline < cn.armed) {
		cn.arm(cl.deadline)
	}
	cn.mu.Unlock()
	cn.queue(cl.frame, alone)
	return id, cl, nil
}

// queue appends frame to the outgoing buffer for the socket's owner, making
// the writer goroutine the owner if there is none. A caller with no other
// call pending on the connection, when the socket has no owner, writes its
// frame itself instead: nothing else is on its way to batch it with, and the
// writer's wake-up (a hand-off between goroutines, for every request of a
// lone client) is saved. What others append meanwhile goes to the writer.
func (cn *conn) queue(frame []byte, alone bool) {
	cn.wmu.Lock()
	if cn.writing || !alone {
		cn.out = append(cn.out, frame...)
		cn.outN++
		wake := !cn.writing
		cn.writing = true
		cn.wmu.Unlock()
		if wake {
			cn.wake <- struct{}{} // never blocks: one wake per ownership
		}
		return
	}
	cn.writing = true
	cn.wmu.Unlock()
	cn.direct.Add(1)
	if err := cn.write(frame); err != nil {
		cn.fail(err)
		return // the socket keeps its owner: nothing more is written
	}
	cn.wmu.Lock()
	more := cn.outN > 0
	cn.writing = more
	cn.wmu.Unlock()
	if more {
		cn.wake <- struct{}{}
	}
}

// write writes b to the socket; only the socket's owner calls it.
func (cn *conn) write(b []byte) error {
	if now := time.Now(); now.After(cn.moveDeadline) {
		cn.nc.SetWriteDeadline(now.Add(cn.writeGrace))
		cn.moveDeadline = now.Add(cn.writeGrace - cn.cfg.requestTimeout)
	}
	_, err := cn.nc.Write(b)
	return err
}

// roundTrip sends req and waits for its answer, at most timeout (0: no limit
// besides ctx). sent reports whether the request may have reached the server.
func (cn *conn) roundTrip(ctx context.Context, req *wire.Request, timeout time.Duration) (resp *wire.Response, sent bool, err error) {
	id, cl, err := cn.send(req, nil, timeout)
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

// writeLoop writes what callers queue, whenever a wake makes it the
// socket's owner, until it finds nothing more to write.
func (cn *conn) writeLoop() {
	defer cn.wg.Done()
	var spare []byte
	for {
		select {
		case <-cn.wake:
		case <-cn.closed:
			return
		}
		for yields := 0; ; {
			cn.wmu.Lock()
			n := cn.outN
			if n == 0 {
				cn.writing = false
				cn.wmu.Unlock()
				break
			}
			cn.wmu.Unlock()
			if yields < writeYields && cn.moreComing(n) {
				// Under load the callers whose answers just arrived
				// are about to send: let them, and carry their
				// requests in this write instead of one write each.
				yields++
				runtime.Gosched()
				continue
			}
			cn.wmu.Lock()
			buf := cn.out
			cn.out, cn.outN = spare[:0], 0
			cn.wmu.Unlock()
			if err := cn.write(buf); err != nil {
				cn.fail(err)
				return
			}
			if cap(buf) <= maxWriteBuffer {
				spare = buf
			}
			yields = 0
		}
	}
}

// writeYields bounds how often the writer lets callers run before it
// writes a short batch: a write syscall costs tens of times a yield.
const writeYields = 2

// moreComing reports whether more calls are outstanding than the writer has
// gathered, so more requests are likely on their way.
func (cn *conn) moreComing(gathered int) bool {
	cn.mu.Lock()
	n := len(cn.pending)
	cn.mu.Unlock()
	return n > gathered
}

// maxWriteBuffer bounds the outgoing buffer a connection keeps for reuse
// (one large request must not pin its size).
const maxWriteBuffer = 256 << 10

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
	if resp.ID == 0 && resp.Stream == 0 && resp.Code != wire.OK {
		cn.closing(resp)
		return
	}
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

// closing takes the frame a server sends before it closes the connection
// (ID 0, no stream): a connection idle with nothing open (Closed), a frame
// stalled or too large (Malformed, TooLarge). The connection is failed with
// the server's reason. After an idle close nothing the client sent since
// was read (the server closes only with no request in flight and nothing
// unread): each pending call gets the Closed answer, which callers retry
// on another connection as not applied.
func (cn *conn) closing(resp *wire.Response) {
	if resp.Code == wire.Closed {
		cn.mu.Lock()
		pending := cn.pending
		cn.pending = map[uint64]*call{}
		cn.mu.Unlock()
		for _, cl := range pending {
			answer := *resp
			cl.done <- result{resp: &answer}
		}
	}
	cn.fail(resp.AsError())
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
	cn.pending, cn.streams = map[uint64]*call{}, map[uint64]streamSink{}
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
