package router_test

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/router"
	"github.com/wardenlock/warden/wire"
)

// dialRaw connects and says hello by hand.
func dialRaw(t *testing.T, addr string) *nodetest.WireConn {
	t.Helper()
	w, hello := nodetest.DialWire(t, addr, nil, "", 0)
	if hello.Code != wire.OK {
		t.Fatalf("hello: %+v", hello)
	}
	return w
}

// closedWith waits (at most d) for the server to send one frame and close
// the connection, and returns that frame.
func closedWith(t *testing.T, w *nodetest.WireConn, d time.Duration) *wire.Response {
	t.Helper()
	resp := w.Recv(d)
	if resp == nil {
		t.Fatalf("no answer within %v before the close", d)
	}
	if next := w.Recv(d); next != nil {
		t.Fatalf("after %+v: %+v, want the connection closed", resp, next)
	}
	return resp
}

// TestStalledFrameClosesTheConnection: a client that sends half a frame
// and stalls is told and closed once FrameTimeout has passed.
func TestStalledFrameClosesTheConnection(t *testing.T) {
	sec := router.Security{FrameTimeout: 200 * time.Millisecond, IdleTimeout: -1}
	w := dialRaw(t, serveRouter(t, router.Config{Security: sec}, nil))
	var half [6]byte
	binary.BigEndian.PutUint32(half[:], 100) // a 100-byte body, of which 2 bytes come
	w.NC.Write(half[:])
	resp := closedWith(t, w, 20*time.Second)
	if resp.Code != wire.Malformed || !strings.Contains(resp.Msg, "incomplete") {
		t.Fatalf("stalled frame answered %+v", resp)
	}
}

// TestIdleConnectionIsClosed: a handshaken connection with nothing open
// that sends nothing is closed after IdleTimeout, with a Closed frame
// that says why; one with a hold stream (or a watch, or a parked wait)
// stays open however long it is silent.
func TestIdleConnectionIsClosed(t *testing.T) {
	sec := router.Security{FrameTimeout: 100 * time.Millisecond, IdleTimeout: 300 * time.Millisecond}
	addr := serveRouter(t, router.Config{Security: sec}, nil)
	idle := dialRaw(t, addr)
	streaming := dialRaw(t, addr)
	if resp := streaming.Do(&wire.Request{Op: wire.OpHolds}); resp.Code != wire.OK {
		t.Fatalf("holds: %+v", resp)
	}
	resp := closedWith(t, idle, 20*time.Second)
	if resp.Code != wire.Closed || !strings.Contains(resp.Msg, "idle") {
		t.Fatalf("idle connection answered %+v", resp)
	}
	// Ten idle timeouts later the connection with a stream still answers.
	time.Sleep(10 * sec.IdleTimeout)
	if resp := streaming.Do(&wire.Request{Op: wire.OpUnwatch, Stream: 77}); resp.Code == wire.Closed {
		t.Fatalf("the streaming connection answered %+v", resp)
	}
}

// TestSlowButSteadyFramesAreRead: frames that trickle in, each within
// FrameTimeout of its first byte, are all read and answered (the deadline
// moves with each frame; it is not a bound on the connection's life).
func TestSlowButSteadyFramesAreRead(t *testing.T) {
	sec := router.Security{FrameTimeout: time.Second, IdleTimeout: -1}
	w := dialRaw(t, serveRouter(t, router.Config{Security: sec}, nil))
	for id := uint64(2); id < 8; id++ { // about four FrameTimeouts in all
		b, _ := wire.AppendFrame(nil, &wire.Request{ID: id, Op: wire.OpUnwatch, Stream: 77})
		w.NC.Write(b[:3])
		time.Sleep(sec.FrameTimeout / 10)
		w.NC.Write(b[3:])
		if resp := w.Recv(10 * time.Second); resp == nil || resp.ID != id {
			t.Fatalf("frame %d: %+v", id, resp)
		}
		time.Sleep(sec.FrameTimeout * 6 / 10)
	}
}
