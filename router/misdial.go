package router

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/wardenlock/warden/wire"
)

// A connection that opens with something other than a Warden frame is told
// what it reached, in a form its own tool shows: an HTTP request (curl, a
// browser, a load balancer's health check) gets an HTTP 400 naming the
// protocol and the admin port; a TLS ClientHello on a plaintext port, or a
// plaintext frame on a TLS port, gets a Warden error frame saying which
// one the port expects. Then the connection closes. All of it is looked
// at only when the first frame fails to read, never on a served connection.

// misdialDrain bounds the time and bytes spent reading what a misdialed
// client still sends after its answer: closing with unread input resets
// the connection, and the client may lose the answer to the reset.
const (
	misdialDrain      = time.Second
	misdialDrainBytes = 64 << 10
)

// misdialed answers a connection whose first frame could not be read,
// when what it sent is recognisably another protocol; it reports whether
// it answered (the caller then closes the connection).
func (c *conn) misdialed(err error, r io.Reader) bool {
	if c.hello {
		return false
	}
	var fe *wire.FrameSizeError
	if errors.As(err, &fe) {
		head := lengthBytes(fe.Size)
		switch {
		case looksLikeHTTP(head[:]):
			c.sendRaw(httpRefusal(c.httpHint()))
		case looksLikeTLS(head[:]):
			c.sendRaw(wire.AppendResponseFrame(nil, &wire.Response{Code: wire.InvalidArgument,
				Msg: "this port speaks Warden's protocol in plaintext, not TLS: connect without TLS"}))
		default:
			return false
		}
		drain(c.nc, r)
		return true
	}
	var rhe tls.RecordHeaderError
	if !errors.As(err, &rhe) || rhe.Conn == nil {
		return false
	}
	// Plaintext on a TLS port: answer on the raw connection, in plaintext.
	var reply []byte
	if looksLikeHTTP(rhe.RecordHeader[:4]) {
		reply = httpRefusal("This port expects TLS, and Warden's binary protocol, not HTTP. " + c.adminHint())
	} else {
		reply = wire.AppendResponseFrame(nil, &wire.Response{Code: wire.InvalidArgument,
			Msg: "this port expects TLS: connect with TLS (the cluster's CA; warden --tls-dir or --cacert)"})
	}
	rhe.Conn.SetWriteDeadline(time.Now().Add(misdialDrain))
	if _, err := rhe.Conn.Write(reply); err == nil {
		drain(rhe.Conn, rhe.Conn)
	}
	return true
}

// sendRaw queues bytes that are not a response frame (an HTTP answer).
func (c *conn) sendRaw(b []byte) {
	c.mu.Lock()
	if !c.closed {
		c.out = append(c.out, b...)
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// drain reads what the client still sends, briefly (while the answer goes
// out), so that the close does not reset the connection under an answer
// the client has not read yet.
func drain(nc net.Conn, r io.Reader) {
	nc.SetReadDeadline(time.Now().Add(misdialDrain))
	io.CopyN(io.Discard, r, misdialDrainBytes)
}

func lengthBytes(size int) [4]byte {
	return [4]byte{byte(size >> 24), byte(size >> 16), byte(size >> 8), byte(size)}
}

// looksLikeHTTP: the first four bytes of an HTTP/1 request line (or of the
// HTTP/2 preface).
func looksLikeHTTP(b []byte) bool {
	switch string(b) {
	case "GET ", "POST", "PUT ", "HEAD", "DELE", "OPTI", "PATC", "CONN", "TRAC", "PRI ":
		return true
	}
	return false
}

// looksLikeTLS: a TLS handshake record (content type 22, version 3.x).
func looksLikeTLS(b []byte) bool {
	return len(b) >= 3 && b[0] == 0x16 && b[1] == 0x03 && b[2] <= 0x04
}

func httpRefusal(msg string) []byte {
	body := msg + "\n"
	return fmt.Appendf(nil, "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"+
		"Content-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
}

func (c *conn) httpHint() string {
	return "This is a Warden client port: it speaks Warden's binary protocol (docs/protocol.md), not HTTP. " + c.adminHint()
}

// adminHint points to the admin port, this node's when it has one.
func (c *conn) adminHint() string {
	if h := c.s.cfg.Host; h != nil {
		if t := h.Table(); t != nil {
			if n, ok := t.Node(h.NodeID()); ok && n.AdminAddr != "" {
				return "The status page, the HTTP API and the metrics are on the admin port, " + n.AdminAddr + "."
			}
		}
	}
	return "The status page, the HTTP API and the metrics are on a node's admin port (7270 by default)."
}
