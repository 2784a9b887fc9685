package client

import (
	"bufio"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/wardenlock/warden/wire"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeServer speaks the wire protocol over real TCP on 127.0.0.1 and
// answers with a per-test script.
type fakeServer struct {
	t      *testing.T
	ln     net.Listener
	handle func(fc *fakeConn, req *wire.Request) // called on the conn's reader goroutine
	hello  func(req *wire.Request) *wire.Response

	mu    sync.Mutex
	conns []*fakeConn
	reqs  []wire.Request
	wg    sync.WaitGroup
}

type fakeConn struct {
	srv   *fakeServer
	nc    net.Conn
	wmu   sync.Mutex
	holds uint64 // the hold stream's id, once the client opened it
}

func newFakeServer(t *testing.T, handle func(fc *fakeConn, req *wire.Request)) *fakeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeServer{t: t, ln: ln, handle: handle}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.close)
	return s
}

func (s *fakeServer) addr() string { return s.ln.Addr().String() }

func (s *fakeServer) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		fc := &fakeConn{srv: s, nc: nc}
		s.mu.Lock()
		s.conns = append(s.conns, fc)
		s.mu.Unlock()
		s.wg.Add(1)
		go fc.serve()
	}
}

func (fc *fakeConn) serve() {
	defer fc.srv.wg.Done()
	defer fc.nc.Close()
	br := bufio.NewReader(fc.nc)
	first := true
	for {
		body, err := wire.ReadFrame(br, wire.DefaultMaxFrame, nil)
		if err != nil {
			return
		}
		var req wire.Request
		if err := wire.DecodeRequest(body, &req); err != nil {
			fc.srv.t.Errorf("fake server: %v", err)
			return
		}
		if req.Op == wire.OpHolds && !first {
			// Every pool connection opens its hold stream first: answered
			// here, not counted among the scripted requests.
			fc.srv.mu.Lock()
			fc.holds = req.ID
			fc.srv.mu.Unlock()
			fc.reply(&wire.Response{ID: req.ID, Stream: req.ID})
			continue
		}
		fc.srv.mu.Lock()
		fc.srv.reqs = append(fc.srv.reqs, req)
		fc.srv.mu.Unlock()
		if first {
			first = false
			if req.Op != wire.OpHello {
				fc.srv.t.Errorf("fake server: first frame is %s, want hello", req.Op)
				return
			}
			resp := &wire.Response{ID: req.ID}
			if fc.srv.hello != nil {
				resp = fc.srv.hello(&req)
			}
			fc.reply(resp)
			if resp.Code != wire.OK {
				return
			}
			continue
		}
		fc.srv.handle(fc, &req)
	}
}

// reply sends one frame (safe from any goroutine; errors mean the client left).
func (fc *fakeConn) reply(resp *wire.Response) {
	frame, err := wire.AppendFrame(nil, resp)
	if err != nil {
		fc.srv.t.Errorf("fake server: encode: %v", err)
		return
	}
	fc.wmu.Lock()
	defer fc.wmu.Unlock()
	fc.nc.Write(frame)
}

func (fc *fakeConn) answer(req *wire.Request, resp wire.Response) {
	resp.ID = req.ID
	fc.reply(&resp)
}

func (fc *fakeConn) drop() { fc.nc.Close() }

// requests returns the requests of op received so far.
func (s *fakeServer) requests(op wire.Op) []wire.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []wire.Request
	for _, r := range s.reqs {
		if r.Op == op {
			out = append(out, r)
		}
	}
	return out
}

func (s *fakeServer) connCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// stop closes the listener and every connection: the endpoint is down.
func (s *fakeServer) stop() {
	s.ln.Close()
	s.mu.Lock()
	for _, fc := range s.conns {
		fc.nc.Close()
	}
	s.mu.Unlock()
}

func (s *fakeServer) close() {
	s.stop()
	s.wg.Wait()
}

// okHandler answers every request with OK.
func okHandler(fc *fakeConn, req *wire.Request) { fc.answer(req, wire.Response{}) }

// newTestClient connects to the given servers with short timeouts and
// closes the client when the test ends.
func newTestClient(t *testing.T, addrs []string, opts ...Option) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Scripted servers count every request they see, so the direct router's
	// table refreshes are off here; TestDirectRouting covers them.
	opts = append([]Option{WithPoolSize(1), WithBackoff(time.Millisecond, 20*time.Millisecond),
		WithRequestTimeout(2 * time.Second), WithDialTimeout(time.Second), WithoutDirectRouting()}, opts...)
	c, err := New(ctx, addrs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// withClock injects the session clock.
func withClock(c clock) Option { return func(cfg *config) { cfg.clock = c } }

// fakeClock is a manual clock: timers fire only when Advance passes them.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers map[*fakeTimer]struct{}
}

type fakeTimer struct {
	clk *fakeClock
	at  time.Time
	ch  chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Unix(1_000_000, 0), timers: map[*fakeTimer]struct{}{}}
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) NewTimer(d time.Duration) timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{clk: f, at: f.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- f.now
	} else {
		f.timers[t] = struct{}{}
	}
	return t
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	for t := range f.timers {
		if !t.at.After(f.now) {
			delete(f.timers, t)
			t.ch <- f.now
		}
	}
}

// Jump moves the clock without firing any timer: a process whose
// goroutines have not run since (starved, or stopped by SIGSTOP).
func (f *fakeClock) Jump(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

// pending returns the number of timers that have not fired or stopped.
func (f *fakeClock) pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.clk.mu.Lock()
	defer t.clk.mu.Unlock()
	_, ok := t.clk.timers[t]
	delete(t.clk.timers, t)
	return ok
}

// eventually polls cond until it holds or 5 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func contextWithCancel(t *testing.T) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx, cancel
}
