package router

import (
	"bufio"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenlock/warden/wire"
)

// TestFairShareBehindOneAddress: connections from one address, one or ten
// flooding their IP's frame budget as fast as they can write, another
// sending one request at a time. With fair shares (the default) the well-behaved
// connection is within its share and is never paused: every one of its
// requests is answered without its reader waiting, while the flooder's
// reader pauses. With UnfairReads (first come, first served) the same
// well-behaved connection pays the flooder's debt and pauses: the test
// would catch the starvation it guards against.
func TestFairShareBehindOneAddress(t *testing.T) {
	for _, tc := range []struct {
		name       string
		unfair     bool
		flooders   int
		goodPauses func(int) bool
	}{
		{"fair shares", false, 1, func(n int) bool { return n == 0 }},
		{"fair shares, ten flooders", false, 10, func(n int) bool { return n == 0 }},
		{"first come first served", true, 1, func(n int) bool { return n > 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flooder, good := fairRun(t, tc.unfair, tc.flooders, 30)
			if flooder == 0 {
				t.Fatal("the flooder was never paused: the budget was not under pressure")
			}
			if !tc.goodPauses(good) {
				t.Fatalf("the well-behaved connection paused %d times (flooder %d)", good, flooder)
			}
		})
	}
}

// fairRun floods from some connections and sends n requests one by one on
// another, all from the same address; it returns the flooders' and the
// well-behaved reader's pause counts.
func fairRun(t *testing.T, unfair bool, flooders, n int) (flooderPauses, goodPauses int) {
	s := newTestServer(t, Config{Security: Security{ConnRate: -1, ByteRate: -1,
		FrameRate: 200, FrameBurst: 20, UnfairReads: unfair}})
	start := func() (*conn, net.Conn, chan struct{}) {
		a, b := net.Pipe() // both "pipe": one address, one budget
		budget := s.admitConn(a)
		if budget == nil {
			t.Fatal("connection refused")
		}
		c := newConn(s, a, budget)
		done := make(chan struct{})
		go func() { defer close(done); c.serve(); s.releaseConn(a) }()
		return c, b, done
	}
	hello, _ := wire.AppendFrame(nil, &wire.Request{ID: 1, Op: wire.OpHello, Rev: wire.ProtocolVersion})
	junk, _ := wire.AppendFrame(nil, &wire.Request{ID: 2, Op: wire.OpUnwatch, Stream: 99, Auth: strings.Repeat("x", 100)})
	var (
		wg     sync.WaitGroup
		fconns []*conn
		fpipes []net.Conn
		fdones []chan struct{}
	)
	gc, gb, gdone := start()
	for i := 0; i < flooders; i++ {
		fc, fb, fdone := start()
		fconns, fpipes, fdones = append(fconns, fc), append(fpipes, fb), append(fdones, fdone)
		wg.Add(2)
		go func() { defer wg.Done(); io.Copy(io.Discard, fb) }()
		go func() {
			defer wg.Done()
			if _, err := fb.Write(hello); err != nil {
				return
			}
			for {
				if _, err := fb.Write(junk); err != nil {
					return // closed at the end of the test
				}
			}
		}()
	}
	if gc.share == nil && !unfair {
		t.Fatal("no fair share by default")
	}
	// Start once the flooders have run their IP's budget dry.
	before := ReadFloodStats().ReadsThrottled
	for ReadFloodStats().ReadsThrottled == before {
		time.Sleep(time.Millisecond)
	}

	r := bufio.NewReader(gb)
	ask := func(req *wire.Request, want wire.Code) {
		b, _ := wire.AppendFrame(nil, req)
		if _, err := gb.Write(b); err != nil {
			t.Fatal(err)
		}
		body, err := wire.ReadFrame(r, wire.DefaultMaxFrame, nil)
		if err != nil {
			t.Fatalf("answer to %d: %v", req.ID, err)
		}
		var resp wire.Response
		if err := wire.DecodeResponse(body, &resp); err != nil || resp.ID != req.ID || resp.Code != want {
			t.Fatalf("answer %v %q to %d (%v), want %v", resp.Code, resp.Msg, resp.ID, err, want)
		}
	}
	ask(&wire.Request{ID: 1, Op: wire.OpHello, Rev: wire.ProtocolVersion}, wire.OK)
	for id := uint64(2); id < uint64(n)+2; id++ {
		ask(&wire.Request{ID: id, Op: wire.OpUnwatch, Stream: 99}, wire.NotFound) // served: no such stream
	}
	gb.Close()
	<-gdone
	for i, fb := range fpipes {
		fconns[i].close() // wakes a reader paused for the budget
		fb.Close()
		<-fdones[i]
	}
	wg.Wait()
	for _, fc := range fconns {
		flooderPauses += fc.pauses
	}
	return flooderPauses, gc.pauses
}
