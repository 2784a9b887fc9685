package router_test

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/wardenlock/warden/router"
	"github.com/wardenlock/warden/wire"
)

// rawConn is a handshaken connection that sends hand-made bytes.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	rc := &rawConn{t: t, nc: nc, r: bufio.NewReader(nc)}
	if resp := rc.do(&wire.Request{ID: 1, Op: wire.OpHello, Rev: wire.ProtocolVersion}); resp.Code != wire.OK {
		t.Fatalf("hello: %+v", resp)
	}
	return rc
}

func (rc *rawConn) do(req *wire.Request) *wire.Response {
	rc.t.Helper()
	b, _ := wire.AppendFrame(nil, req)
	if _, err := rc.nc.Write(b); err != nil {
		rc.t.Fatal(err)
	}
	resp, err := rc.next(10 * time.Second)
	if err != nil {
		rc.t.Fatalf("%v: %v", req.Op, err)
	}
	return resp
}

// next reads the next frame the server sends, waiting at most d.
func (rc *rawConn) next(d time.Duration) (*wire.Response, error) {
	rc.nc.SetReadDeadline(time.Now().Add(d))
	body, err := wire.ReadFrame(rc.r, wire.DefaultMaxFrame, nil)
	if err != nil {
		return nil, err
	}
	var resp wire.Response
	return &resp, wire.DecodeResponse(body, &resp)
}

// closedWith waits (at most d) for the server to send one frame and close
// the connection, and returns that frame.
func (rc *rawConn) closedWith(d time.Duration) *wire.Response {
	rc.t.Helper()
	resp, err := rc.next(d)
	if err != nil {
		rc.t.Fatalf("no answer before the close: %v", err)
	}
	if _, err := rc.next(d); err != io.EOF {
		rc.t.Fatalf("after %+v: %v, want the connection closed", resp, err)
	}
	return resp
}

// TestStalledFrameClosesTheConnection: a client that sends half a frame
// and stalls is told and closed once FrameTimeout has passed.
func TestStalledFrameClosesTheConnection(t *testing.T) {
	sec := router.Security{FrameTimeout: 200 * time.Millisecond, IdleTimeout: -1}
	rc := dialRaw(t, serveRouter(t, router.Config{Security: sec}, nil))
	var half [6]byte
	binary.BigEndian.PutUint32(half[:], 100) // a 100-byte body, of which 2 bytes come
	rc.nc.Write(half[:])
	resp := rc.closedWith(20 * time.Second)
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
	if resp := streaming.do(&wire.Request{ID: 2, Op: wire.OpHolds}); resp.Code != wire.OK {
		t.Fatalf("holds: %+v", resp)
	}
	resp := idle.closedWith(20 * time.Second)
	if resp.Code != wire.Closed || !strings.Contains(resp.Msg, "idle") {
		t.Fatalf("idle connection answered %+v", resp)
	}
	// Ten idle timeouts later the connection with a stream still answers.
	time.Sleep(10 * sec.IdleTimeout)
	if resp := streaming.do(&wire.Request{ID: 3, Op: wire.OpUnwatch, Stream: 77}); resp.ID != 3 {
		t.Fatalf("the streaming connection answered %+v", resp)
	}
}

// TestSlowButSteadyFramesAreRead: frames that trickle in, each within
// FrameTimeout of its first byte, are all read and answered (the deadline
// moves with each frame; it is not a bound on the connection's life).
func TestSlowButSteadyFramesAreRead(t *testing.T) {
	sec := router.Security{FrameTimeout: time.Second, IdleTimeout: -1}
	rc := dialRaw(t, serveRouter(t, router.Config{Security: sec}, nil))
	for id := uint64(2); id < 8; id++ { // about four FrameTimeouts in all
		b, _ := wire.AppendFrame(nil, &wire.Request{ID: id, Op: wire.OpUnwatch, Stream: 77})
		rc.nc.Write(b[:3])
		time.Sleep(sec.FrameTimeout / 10)
		rc.nc.Write(b[3:])
		if resp, err := rc.next(10 * time.Second); err != nil || resp.ID != id {
			t.Fatalf("frame %d: %+v %v", id, resp, err)
		}
		time.Sleep(sec.FrameTimeout * 6 / 10)
	}
}
