package node_test

import (
	"bufio"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/wire"
)

// rawConn speaks the wire protocol by hand, to send what a well-behaved
// client never would.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	rc := &rawConn{t: t, nc: nc, r: bufio.NewReader(nc)}
	rc.send(&wire.Request{ID: 1, Op: wire.OpHello, Rev: wire.ProtocolVersion})
	if resp := rc.recv(); resp.Code != wire.OK {
		t.Fatalf("hello: %+v", resp)
	}
	return rc
}

func (rc *rawConn) send(req *wire.Request) {
	b, err := wire.AppendFrame(nil, req)
	if err != nil {
		rc.t.Fatal(err)
	}
	rc.write(b)
}

func (rc *rawConn) write(b []byte) {
	if _, err := rc.nc.Write(b); err != nil {
		rc.t.Fatal(err)
	}
}

func (rc *rawConn) recv() *wire.Response {
	rc.t.Helper()
	rc.nc.SetReadDeadline(time.Now().Add(15 * time.Second))
	body, err := wire.ReadFrame(rc.r, wire.DefaultMaxFrame, nil)
	if err != nil {
		rc.t.Fatalf("read: %v", err)
	}
	var resp wire.Response
	if err := wire.DecodeResponse(body, &resp); err != nil {
		rc.t.Fatal(err)
	}
	return &resp
}

// TestHostileInputGetsTypedErrors sends malformed frames, oversized frames
// and values, invalid paths, wrong tokens, unknown and internal ops: each
// gets its typed error and the node keeps serving the same connection and
// everyone else.
func TestHostileInputGetsTypedErrors(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{})
	addr := c.AllEndpoints()[0]
	rc := dialRaw(t, addr)
	big := strings.Repeat("x", 5000)
	cases := []struct {
		name string
		req  *wire.Request
		want wire.Code
	}{
		{"empty path", &wire.Request{ID: 10, Op: wire.OpAcquire, Path: "", TTL: 5000}, wire.InvalidArgument},
		{"relative path", &wire.Request{ID: 11, Op: wire.OpAcquire, Path: "a/b", TTL: 5000}, wire.InvalidArgument},
		{"dotdot", &wire.Request{ID: 12, Op: wire.OpAcquire, Path: "/a/../b", TTL: 5000}, wire.InvalidArgument},
		{"control char", &wire.Request{ID: 13, Op: wire.OpKVPut, Path: "/a/\x01", Value: []byte("v")}, wire.InvalidArgument},
		{"too deep", &wire.Request{ID: 14, Op: wire.OpKVGet, Path: strings.Repeat("/d", 40)}, wire.InvalidArgument},
		{"oversize value", &wire.Request{ID: 15, Op: wire.OpKVPut, Path: "/kv/ns/big", Value: []byte(big)}, wire.TooLarge},
		{"ttl too short", &wire.Request{ID: 16, Op: wire.OpAcquire, Path: "/a/b/c", TTL: 10}, wire.InvalidArgument},
		{"ttl too long", &wire.Request{ID: 17, Op: wire.OpAcquire, Path: "/a/b/c", TTL: 1 << 40}, wire.InvalidArgument},
		{"bad mode", &wire.Request{ID: 18, Op: wire.OpAcquire, Path: "/a/b/c", TTL: 5000, Mode: 9}, wire.InvalidArgument},
		{"release unknown token", &wire.Request{ID: 19, Op: wire.OpRelease, Path: "/a/b/c", Token: 424242}, wire.NotHolder},
		{"unknown op", &wire.Request{ID: 20, Op: 77, Path: "/a/b"}, wire.UnknownOp},
		{"internal op", &wire.Request{ID: 21, Op: wire.OpExpire, Lease: 5}, wire.InvalidArgument},
		{"range-move step from a client", &wire.Request{ID: 23, Op: wire.OpDropRange, Shard: 2, Gen: 1,
			Ranges: []wire.Range{{Start: "", End: ""}}}, wire.InvalidArgument},
		{"range export from a client", &wire.Request{ID: 24, Op: wire.OpExportRange, Shard: 2, Gen: 1,
			Ranges: []wire.Range{{Start: "", End: ""}}}, wire.InvalidArgument},
		{"leader transfer from a client", &wire.Request{ID: 25, Op: wire.OpLeaderTransfer, Shard: 2, ToReplica: 1}, wire.InvalidArgument},
		{"shallow lock spanning shards", &wire.Request{ID: 22, Op: wire.OpAcquire, Path: "/a", TTL: 5000}, wire.SpansRanges},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc.send(tc.req)
			resp := rc.recv()
			if resp.ID != tc.req.ID || resp.Code != tc.want {
				t.Fatalf("got id=%d %v (%s), want id=%d %v", resp.ID, resp.Code, resp.Msg, tc.req.ID, tc.want)
			}
			if resp.Msg == "" {
				t.Errorf("%v without a message saying what was wrong", resp.Code)
			}
		})
	}

	t.Run("malformed frame closes the connection", func(t *testing.T) {
		// docs/protocol.md §1: a body that does not decode is answered
		// Malformed and the connection is closed.
		rc := dialRaw(t, addr)
		rc.write([]byte{0, 0, 0, 3, 0xc1, 0xc1, 0xc1})
		if resp := rc.recv(); resp.Code != wire.Malformed {
			t.Fatalf("got %v, want Malformed", resp.Code)
		}
		rc.nc.SetReadDeadline(time.Now().Add(15 * time.Second))
		if _, err := wire.ReadFrame(rc.r, wire.DefaultMaxFrame, nil); err == nil {
			t.Fatal("connection still open after a malformed frame")
		}
	})
	t.Run("oversized length prefix closes the connection before the body is read", func(t *testing.T) {
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], uint32(wire.DefaultMaxFrame+1))
		rc.write(hdr[:])
		if resp := rc.recv(); resp.Code != wire.TooLarge || resp.Msg == "" {
			t.Fatalf("got %v %q, want TooLarge with a message", resp.Code, resp.Msg)
		}
		rc.nc.SetReadDeadline(time.Now().Add(15 * time.Second))
		if _, err := wire.ReadFrame(rc.r, wire.DefaultMaxFrame, nil); err == nil {
			t.Fatal("connection still open after an oversized length prefix")
		}
	})
	t.Run("a new connection serves", func(t *testing.T) {
		rc := dialRaw(t, addr)
		rc.send(&wire.Request{ID: 99, Op: wire.OpAcquire, Path: "/hostile/ok/lock", TTL: 5000})
		if resp := rc.recv(); resp.Code != wire.OK || resp.Token == 0 {
			t.Fatalf("after hostile input: %+v", resp)
		}
	})
	t.Run("other clients still served", func(t *testing.T) {
		cl := newClient(t, c)
		ctx := ctxT(t, 20*time.Second)
		if _, err := cl.Put(ctx, "/hostile/ok/kv", []byte("v")); err != nil {
			t.Fatal(err)
		}
		_, err := cl.Acquire(ctx, "/hostile/ok/lock", 5*time.Second, client.WithTry())
		if !errors.Is(err, client.ErrConflict) {
			t.Fatalf("lock taken on the raw connection must conflict: %v", err)
		}
	})
}

// TestFirstFrameMustBeHello: a connection that skips the handshake is told
// and closed.
func TestFirstFrameMustBeHello(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Shards: 1})
	nc, err := net.Dial("tcp", c.AllEndpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	b, _ := wire.AppendFrame(nil, &wire.Request{ID: 5, Op: wire.OpKVGet, Path: "/a/b"})
	nc.Write(b)
	r := bufio.NewReader(nc)
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	body, err := wire.ReadFrame(r, wire.DefaultMaxFrame, nil)
	if err != nil {
		t.Fatal(err)
	}
	var resp wire.Response
	wire.DecodeResponse(body, &resp)
	if resp.Code != wire.InvalidArgument {
		t.Fatalf("got %v, want InvalidArgument", resp.Code)
	}
	if _, err := wire.ReadFrame(r, wire.DefaultMaxFrame, nil); err == nil {
		t.Fatal("connection left open after a missing handshake")
	}
}
