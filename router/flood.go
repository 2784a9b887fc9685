package router

import (
	"bufio"
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
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
	conns  atomic.Int32 // open connections of the IP (fair shares)
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
	d := c.budget.charge(c.share, time.Now(), c.meter.bytes, c.meter.frames)
	c.meter = readMeter{}
	if d <= 0 {
		return true
	}
	throttledReads.Add(1)
	c.pauses++
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.quit:
		return false
	}
}

// Fairness between the connections of one IP. Charged to one bucket, a
// connection that reads as fast as it can keeps its IP's budget in debt,
// and every other connection of the IP (the well-behaved client behind the
// same NAT, or the same load balancer) would pause to pay that debt. So
// each connection also has a fair share: 1/n of the IP's rates and bursts
// while the IP has n connections. A read within the connection's share goes
// on at once (it still spends the IP's budget); only a connection over its
// share waits on the IP's budget, and so it pays the debt the others left.
// The IP's total stays bounded by its rate (the shares add up to it), and a
// connection alone, or with idle neighbours, may still use the whole budget.

// fairShare is one connection's share of its IP's budget (reader only).
type fairShare struct {
	n      int32 // the IP's connection count the limits were set for
	bytes  *rate.Limiter
	frames *rate.Limiter
}

// Smallest share bursts: one full read buffer, a screenful of frames.
const (
	minShareBytes  = 64<<10 + 8
	minShareFrames = 64
)

func (s *Server) newFairShare(b *hostBudget) *fairShare {
	if b == nil || s.cfg.Security.UnfairReads || (b.bytes == nil && b.frames == nil) {
		return nil
	}
	return &fairShare{} // sized by fit at the first read
}

// fit sets the share to 1/n of the IP's budget for the IP's current n.
func (sh *fairShare) fit(b *hostBudget, now time.Time) {
	n := max(b.conns.Load(), 1)
	if n == sh.n {
		return
	}
	sh.n = n
	split := func(l **rate.Limiter, ip *rate.Limiter, least int) {
		if ip == nil {
			return
		}
		r, burst := ip.Limit()/rate.Limit(n), max(ip.Burst()/int(n), least)
		if *l == nil {
			*l = rate.NewLimiter(r, burst) // starts full
			return
		}
		(*l).SetLimitAt(now, r)
		(*l).SetBurstAt(now, burst)
	}
	split(&sh.bytes, b.bytes, minShareBytes)
	split(&sh.frames, b.frames, minShareFrames)
}

// within takes n bytes and f frames from the share if it has them all.
func (sh *fairShare) within(now time.Time, n, f int) bool {
	if sh.bytes != nil && sh.bytes.TokensAt(now) < float64(n) ||
		sh.frames != nil && sh.frames.TokensAt(now) < float64(f) {
		return false
	}
	if sh.bytes != nil {
		sh.bytes.ReserveN(now, n)
	}
	if sh.frames != nil {
		sh.frames.ReserveN(now, f)
	}
	return true
}

// charge spends n bytes and f frames of the IP's budget for a connection
// with share sh (nil: no fairness) and returns how long its reader pauses.
func (b *hostBudget) charge(sh *fairShare, now time.Time, n, f int) time.Duration {
	if sh == nil {
		return b.delay(now, n, f)
	}
	sh.fit(b, now)
	if sh.within(now, n, f) {
		b.delay(now, n, f) // the debt this may leave is paid by connections over their share
		return 0
	}
	return b.delay(now, n, f)
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
// answers bounds the refusals answered, all addresses together
// (Security.RefusalRate; nil = every one).
func refuse(nc net.Conn, frame []byte, answers *rate.Limiter) {
	if answers != nil && !answers.Allow() {
		// A flood: close at once, with a reset instead of a FIN (no
		// write, no TIME_WAIT left on this side for every refusal).
		silentRefusals.Add(1)
		if tc, ok := nc.(interface{ NetConn() net.Conn }); ok {
			nc = tc.NetConn()
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		nc.Close()
		return
	}
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
