package router

import (
	"bufio"
	"crypto/tls"
	"net"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Flood protection. A hostile or broken client can cost a node CPU in three
// places before any request reaches a shard: accepting connections, reading
// bytes, and discarding junk. Each is bounded so that well-behaved clients
// keep their latency:
//
//   - the accept loop is paced (AcceptRate): past the rate, connections wait
//     in the kernel's backlog instead of costing goroutines, and a dialler
//     that outruns it is slowed down by its own SYN retries;
//   - each client IP has a byte and a frame budget (token buckets): a
//     connection whose IP is over budget is simply not read for a while, so
//     TCP pushes back on the sender and the node's reads go to others;
//   - an oversized length prefix closes the connection before the body is
//     read (MaxOversize = 0), instead of reading megabytes to stay in step;
//   - connections that have not finished their handshake cost a small
//     (4 KiB), pooled read buffer and are cut at HelloTimeout.
//
// Forwarding connections of other nodes (FlagPeer, proven) are exempt from
// the per-IP budgets: they carry many clients' requests.

// hostBudget is the per-IP byte and frame budget, shared by every
// connection from that IP while one is open.
type hostBudget struct {
	bytes  *rate.Limiter // nil = unlimited
	frames *rate.Limiter
}

func (s *Server) newHostBudget() *hostBudget {
	sec := &s.cfg.Security
	b := &hostBudget{}
	if sec.ByteRate > 0 {
		b.bytes = rate.NewLimiter(rate.Limit(sec.ByteRate), max(sec.ByteBurst, s.cfg.MaxFrame+8))
	}
	if sec.FrameRate > 0 {
		b.frames = rate.NewLimiter(rate.Limit(sec.FrameRate), max(sec.FrameBurst, 1))
	}
	return b
}

// delay spends n bytes and f frames and returns how long the reader must
// pause before the budget covers them (0 = go on).
func (b *hostBudget) delay(now time.Time, n, f int) time.Duration {
	var d time.Duration
	if b.bytes != nil && n > 0 {
		d = max(d, reserve(b.bytes, now, n))
	}
	if b.frames != nil && f > 0 {
		d = max(d, reserve(b.frames, now, f))
	}
	return d
}

// reserve takes n tokens, waiting for them if needed; a request over the
// bucket's depth is cut to the depth (the reader pauses for a full bucket).
func reserve(l *rate.Limiter, now time.Time, n int) time.Duration {
	n = min(n, l.Burst())
	return l.ReserveN(now, n).DelayFrom(now)
}

// readMeter counts what a connection's reader took since it last paid, and
// pays when the reader is about to block on the socket anyway (nothing
// buffered), so a pipelining client pays once per read, not once per frame.
type readMeter struct {
	bytes, frames int
}

// pace charges the meter to the connection's IP budget and sleeps while the
// budget is exhausted. It reports false when the connection closed meanwhile.
func (c *conn) pace(r *bufio.Reader, frameBytes int) bool {
	if c.budget == nil || c.peer {
		return true
	}
	c.meter.bytes += frameBytes
	c.meter.frames++
	if r.Buffered() > 0 {
		return true
	}
	d := c.budget.delay(time.Now(), c.meter.bytes, c.meter.frames)
	c.meter = readMeter{}
	if d <= 0 {
		return true
	}
	throttledReads.Add(1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.quit:
		return false
	}
}

// acceptPacer paces the accept loop (all addresses together).
type acceptPacer struct {
	lim *rate.Limiter // nil = unpaced
}

// wait blocks until the next accept is within the rate, or stop closes.
func (p acceptPacer) wait(stop <-chan struct{}) bool {
	if p.lim == nil {
		return true
	}
	now := time.Now()
	d := p.lim.ReserveN(now, 1).DelayFrom(now)
	if d <= 0 {
		return true
	}
	acceptsPaced.Add(1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	}
}

// Read buffers are pooled: a flood of connections that never say anything
// would otherwise allocate (and collect) a buffer each. A connection reads
// through a 4 KiB buffer until its handshake is done, then a 64 KiB one.
var (
	smallReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4<<10) }}
	readers      = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}
)

func getReader(nc net.Conn, small bool) *bufio.Reader {
	pool := &readers
	if small {
		pool = &smallReaders
	}
	r := pool.Get().(*bufio.Reader)
	r.Reset(nc)
	return r
}

func putReader(r *bufio.Reader, small bool) {
	r.Reset(nil)
	if small {
		smallReaders.Put(r)
	} else {
		readers.Put(r)
	}
}

// refuse answers a refused connection with one frame and closes it. A
// plain TCP socket is new, so its send buffer takes the small frame without
// blocking: that is done right in the accept loop, without a goroutine. A
// TLS connection needs a handshake first (round trips the accept loop must
// not wait for), so it gets a goroutine with a 1 s deadline, at most
// maxRefusers at once; past that it is closed without an answer.
func refuse(nc net.Conn, frame []byte) {
	if _, isTLS := nc.(*tls.Conn); !isTLS {
		nc.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
		nc.Write(frame)
		nc.Close()
		return
	}
	select {
	case refusers <- struct{}{}:
	default:
		nc.Close()
		return
	}
	go func() {
		defer func() { <-refusers }()
		nc.SetDeadline(time.Now().Add(time.Second))
		nc.Write(frame)
		nc.Close()
	}()
}

const maxRefusers = 256

var refusers = make(chan struct{}, maxRefusers)
