package node_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/wire"
)

// A withdrawn or failed acquire leaves nothing held, whatever happens to the
// acquire on its way: once the service has answered the withdrawal, the
// acquire can no longer take effect.

// TestWithdrawalBeforeTheAcquireArrives: a withdrawal that reaches the shard
// before its acquire (the acquire still in a router's retries, or in an
// entry a new leader will commit) is answered at once, and the acquire,
// when it comes, takes nothing.
func TestWithdrawalBeforeTheAcquireArrives(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 2})
	rc := dialRaw(t, c.AllEndpoints()[0])
	const path = "/withdrawn/ns/lock"
	const clientID, seq = 77, 5
	rc.send(&wire.Request{ID: 1, Op: wire.OpCancel, Path: path, Client: clientID, Seq: seq})
	if r := rc.recv(); r.Code != wire.OK || r.Token != 0 {
		t.Fatalf("withdrawal of an acquire not seen yet: %+v, want OK without a token", r)
	}
	for _, wait := range []int64{wire.WaitNone, 5000} {
		rc.send(&wire.Request{ID: 2, Op: wire.OpAcquire, Path: path, TTL: 10_000, Wait: wait, Client: clientID, Seq: seq})
		if r := rc.recv(); r.Code != wire.Cancelled {
			t.Fatalf("the withdrawn acquire (wait %d) arrived and was answered %+v, want Cancelled", wait, r)
		}
	}
	info, err := newClient(t, c).LockInfo(ctxT(t, 10*time.Second), path)
	if err != nil && !errors.Is(err, client.ErrNotFound) {
		t.Fatal(err)
	}
	if len(info.Holders)+len(info.Waiters) != 0 {
		t.Fatalf("the withdrawn acquire left %+v", info)
	}
}

// TestServiceWaitTimeoutIsTimeout: a wait that runs out in the service is
// answered Timeout, "nothing is held", never Cancelled (the dequeue that
// ends it used to reach the parked request first and answer "the wait
// ended: cancelled", which a client whose own deadline had not fired yet
// reported as a cancellation it never asked for).
func TestServiceWaitTimeoutIsTimeout(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 2})
	ctx := ctxT(t, 60*time.Second)
	const path = "/waitout/ns/lock"
	heldLock(t, c, path)
	rc := dialRaw(t, c.AllEndpoints()[1])
	for i := uint64(1); i <= 3; i++ {
		rc.send(&wire.Request{ID: i, Op: wire.OpAcquire, Path: path, TTL: 10_000, Wait: 200, Client: 91, Seq: i})
		if r := rc.recv(); r.Code != wire.Timeout {
			t.Fatalf("a wait that ran out in the service: %v (%s), want Timeout", r.Code, r.Msg)
		}
	}
	// Through the client, the caller sees its deadline (and the service's
	// timeout), never a cancellation.
	waiter := session(t, newClient(t, c), 10*time.Second)
	for i := 0; i < 5; i++ {
		lctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
		err := client.NewMutex(waiter, path).Lock(lctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, client.ErrCancelled) {
			t.Fatalf("Lock past its deadline: %v, want context.DeadlineExceeded", err)
		}
	}
}

// TestLateGrantToAnEndedSessionIsGivenBack: a grant that reaches the client
// after its session's local deadline (a paused process: its clock moved on,
// its keepalive loop has not run yet) is given back, and Lock reports the
// session's end instead of success.
func TestLateGrantToAnEndedSessionIsGivenBack(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 2})
	ctx := ctxT(t, 60*time.Second)
	const path = "/lategrant/ns/lock"
	admin := newClient(t, c)
	holder := heldLock(t, c, path)
	clk := &jumpClock{}
	cl, err := client.New(ctx, c.AllEndpoints(), client.WithClock(clk), client.WithRequestTimeout(15*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	s := session(t, cl, 10*time.Second) // its next keepalive is 3.3 s of real time away
	m := client.NewMutex(s, path)
	got := make(chan error, 1)
	go func() { got <- m.Lock(ctx) }()
	waitQueued(t, admin, path)
	clk.jump(11 * time.Second) // past the session's TTL, by the client's clock
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, client.ErrSessionExpired) {
		t.Fatalf("Lock whose grant came after the session's local deadline: %v, want ErrSessionExpired", err)
	}
	if m.IsHeld() {
		t.Error("IsHeld after a grant to an ended session")
	}
	nodetest.WaitFor(t, 10*time.Second, "the late grant given back", func() error {
		info, err := admin.LockInfo(ctx, path)
		if err != nil && !errors.Is(err, client.ErrNotFound) {
			return err
		}
		for _, h := range info.Holders {
			if h.Lease == s.Lease() {
				return errors.New("still held by the ended session")
			}
		}
		return nil
	})
}

// jumpClock is the real clock plus an offset that only moves forward.
type jumpClock struct{ offset atomic.Int64 }

func (c *jumpClock) Now() time.Time       { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *jumpClock) jump(d time.Duration) { c.offset.Add(int64(d)) }

// TestStaleAcquireAfterAConnectionCut: a client's acquire is sent, its
// connection is cut, the client gives up and withdraws it through another
// node; the acquire, which a router on the way still held (here a proxy),
// reaches the service only then. It must take nothing: the lock goes to
// the next waiter, not to the client that gave up.
func TestStaleAcquireAfterAConnectionCut(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 2})
	ctx := ctxT(t, 90*time.Second)
	const path = "/cut/ns/lock"
	admin := newClient(t, c)
	holder := heldLock(t, c, path)
	px := newFrameProxy(t, c.AllEndpoints()[0])
	cl, err := client.New(ctx, []string{px.addr(), c.AllEndpoints()[1]}, client.WithoutDirectRouting(),
		client.WithPoolSize(1), client.WithRequestTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	s := session(t, cl, 30*time.Second)
	px.hold() // from here, the client's frames stop at the proxy
	lctx, cancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() { got <- client.NewMutex(s, path).Lock(lctx) }()
	px.waitHeld(t, 1) // the acquire is on its way
	cancel()
	px.cutClient() // the client's connection breaks; it withdraws through the other node
	err = <-got
	if err == nil {
		t.Fatal("Lock succeeded after its context ended")
	}
	px.deliver(1) // the stale acquire reaches the service now, the rest of the frames never
	next := client.NewMutex(session(t, admin, 30*time.Second), path)
	granted := make(chan error, 1)
	nctx, ncancel := context.WithTimeout(ctx, 20*time.Second)
	defer ncancel()
	go func() { granted <- next.Lock(nctx) }()
	waitQueued(t, admin, path)
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-granted; err != nil {
		t.Fatalf("the next waiter: %v (the lock went to the acquire that was withdrawn)", err)
	}
	info, err := admin.LockInfo(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range info.Holders {
		if h.Lease == s.Lease() {
			t.Fatalf("the withdrawn acquire holds %+v", h)
		}
	}
	for _, w := range info.Waiters {
		if w.Lease == s.Lease() {
			t.Fatalf("the withdrawn acquire waits: %+v", w)
		}
	}
}

// frameProxy forwards one client's connection to a node, frame by frame.
// Once told to hold, it keeps the client's frames instead of sending them;
// deliver(n) sends the first n kept frames to the node and drops the rest.
type frameProxy struct {
	t      *testing.T
	ln     net.Listener
	target string

	mu      sync.Mutex
	holding bool
	kept    [][]byte
	client  net.Conn
	server  net.Conn
}

func newFrameProxy(t *testing.T, target string) *frameProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &frameProxy{t: t, ln: ln, target: target}
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range []net.Conn{p.client, p.server} {
			if c != nil {
				c.Close()
			}
		}
	})
	go p.accept()
	return p
}

func (p *frameProxy) addr() string { return p.ln.Addr().String() }

func (p *frameProxy) accept() {
	for {
		cc, err := p.ln.Accept()
		if err != nil {
			return
		}
		sc, err := net.Dial("tcp", p.target)
		if err != nil {
			cc.Close()
			continue
		}
		p.mu.Lock()
		if p.client != nil { // one client connection at a time: a reconnect after the cut is refused
			p.mu.Unlock()
			cc.Close()
			sc.Close()
			continue
		}
		p.client, p.server = cc, sc
		p.mu.Unlock()
		go func() { // node -> client, as is
			buf := make([]byte, 64<<10)
			for {
				n, err := sc.Read(buf)
				if err != nil {
					cc.Close()
					return
				}
				if _, err := cc.Write(buf[:n]); err != nil {
					return
				}
			}
		}()
		go p.clientFrames(cc, sc)
	}
}

func (p *frameProxy) clientFrames(cc, sc net.Conn) {
	r := bufio.NewReader(cc)
	for {
		body, err := wire.ReadFrame(r, wire.DefaultMaxFrame, nil)
		if err != nil {
			return
		}
		frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
		frame = append(frame, body...)
		p.mu.Lock()
		if p.holding {
			p.kept = append(p.kept, frame)
			p.mu.Unlock()
			continue
		}
		p.mu.Unlock()
		if _, err := sc.Write(frame); err != nil {
			return
		}
	}
}

func (p *frameProxy) hold() {
	p.mu.Lock()
	p.holding = true
	p.mu.Unlock()
}

// waitHeld waits until n client frames are kept.
func (p *frameProxy) waitHeld(t *testing.T, n int) {
	t.Helper()
	nodetest.WaitFor(t, 10*time.Second, "frames kept by the proxy", func() error {
		p.mu.Lock()
		defer p.mu.Unlock()
		if len(p.kept) < n {
			return errors.New("not yet")
		}
		return nil
	})
}

// cutClient closes the client's side; the node's side stays open.
func (p *frameProxy) cutClient() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.client.Close()
}

// deliver sends the first n kept frames to the node, then closes its side.
func (p *frameProxy) deliver(n int) {
	p.mu.Lock()
	frames := p.kept[:min(n, len(p.kept))]
	sc := p.server
	p.mu.Unlock()
	for _, f := range frames {
		if _, err := sc.Write(f); err != nil {
			p.t.Errorf("proxy: deliver: %v", err)
		}
	}
	sc.Close() // the node reads what was written before it sees the close

}

// TestFailedLockAcrossALeaderStopLeavesNothing: a Lock whose deadline comes
// right after its shard's leader is stopped fails (or succeeds), and a
// failed one leaves nothing held or queued once its withdrawal is
// answered, which the client keeps trying until it is: the lock passes
// to the next waiter, never to the attempt that failed.
func TestFailedLockAcrossALeaderStopLeavesNothing(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 2})
	ctx := ctxT(t, 5*time.Minute)
	admin := newClient(t, c)
	for i := 0; i < 3; i++ {
		path := fmt.Sprintf("/leaderstop/ns%d/lock", i)
		holder := heldLock(t, c, path)
		waiter := session(t, newClient(t, c), 10*time.Second)
		const wait = 1500 * time.Millisecond
		lctx, cancel := context.WithTimeout(ctx, wait)
		start := time.Now()
		got := make(chan error, 1)
		go func() { got <- client.NewMutex(waiter, path).Lock(lctx) }()
		waitQueued(t, admin, path)
		time.Sleep(time.Until(start.Add(wait - 100*time.Millisecond)))
		leader := c.LeaderOf(shardOf(t, c, path))
		c.StopNode(leader)
		failed := <-got
		cancel()
		if failed == nil {
			t.Fatal("Lock succeeded while the lock was held")
		}
		c.StartNode(leader)
		c.WaitReady(30 * time.Second)
		next := client.NewMutex(session(t, admin, 10*time.Second), path)
		granted := make(chan error, 1)
		nctx, ncancel := context.WithTimeout(ctx, 30*time.Second)
		go func() { granted <- next.Lock(nctx) }()
		waitQueued(t, admin, path)
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-granted; err != nil {
			t.Fatalf("round %d: the next waiter: %v (the lock went to the attempt that failed with %v)", i, err, failed)
		}
		ncancel()
		info, err := admin.LockInfo(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range info.Holders {
			if h.Lease == waiter.Lease() {
				t.Fatalf("round %d: the failed attempt (%v) holds %+v", i, failed, h)
			}
		}
		if err := next.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// heldLock locks path through a client and session of its own.
func heldLock(t *testing.T, c *nodetest.Cluster, path string) *client.Mutex {
	t.Helper()
	m := client.NewMutex(session(t, newClient(t, c), 10*time.Second), path)
	if err := m.Lock(ctxT(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	return m
}
