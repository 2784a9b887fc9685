package nodetest

import (
	"bufio"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/wardenlock/warden/wire"
)

// WireConn speaks the client protocol by hand, over plaintext or TLS, for
// tests that must send exactly what a client (or an attacker) would: the Go
// client would fill in fields, pick routes and retry on its own.
type WireConn struct {
	T  testing.TB
	NC net.Conn
	R  *bufio.Reader
	id uint64
}

// NewWireConn wraps an open connection (no hello is sent).
func NewWireConn(t testing.TB, nc net.Conn) *WireConn {
	return &WireConn{T: t, NC: nc, R: bufio.NewReader(nc)}
}

// DialWire connects (over TLS when tc is set, verifying the server as
// 127.0.0.1) and says hello with token and flags; the hello's answer is
// returned, or a Closed answer when the connection broke.
func DialWire(t testing.TB, addr string, tc *tls.Config, token string, flags uint32) (*WireConn, *wire.Response) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if tc != nil {
		tc = tc.Clone()
		tc.ServerName = "127.0.0.1"
		nc = tls.Client(nc, tc)
	}
	t.Cleanup(func() { nc.Close() })
	w := NewWireConn(t, nc)
	return w, w.Do(&wire.Request{Op: wire.OpHello, Rev: wire.ProtocolVersion, Auth: token, Flags: flags})
}

// Send numbers req and writes it; the test fails if the write does.
func (w *WireConn) Send(req *wire.Request) uint64 {
	w.T.Helper()
	id, err := w.write(req)
	if err != nil {
		w.T.Fatal(err)
	}
	return id
}

func (w *WireConn) write(req *wire.Request) (uint64, error) {
	w.id++
	req.ID = w.id
	b, err := wire.AppendFrame(nil, req)
	if err != nil {
		w.T.Fatal(err)
	}
	_, err = w.NC.Write(b)
	return req.ID, err
}

// Recv reads the next frame; nil when the connection ended or sent
// something that is not a frame of the protocol (a TLS alert, say).
func (w *WireConn) Recv(timeout time.Duration) *wire.Response {
	w.NC.SetReadDeadline(time.Now().Add(timeout))
	body, err := wire.ReadFrame(w.R, wire.DefaultMaxFrame, nil)
	if err != nil {
		return nil
	}
	var resp wire.Response
	if wire.DecodeResponse(body, &resp) != nil {
		return nil
	}
	return &resp
}

// Do sends req and waits for its answer, skipping pushes: its answer, a
// connection-level refusal (ID 0), or Closed when the connection broke.
func (w *WireConn) Do(req *wire.Request) *wire.Response {
	w.T.Helper()
	id, err := w.write(req)
	if err != nil {
		return &wire.Response{Code: wire.Closed, Msg: "write: " + err.Error()}
	}
	for {
		r := w.Recv(20 * time.Second)
		if r == nil {
			return &wire.Response{Code: wire.Closed, Msg: "connection ended"}
		}
		if r.ID == id || r.ID == 0 && r.Stream == 0 && r.Code != wire.OK {
			return r
		}
	}
}
