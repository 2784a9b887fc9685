package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/wardenlock/warden/wire"
)

// TestIdleCloseIsNotAmbiguous: a server that closes a connection as idle
// sends a Closed frame (ID 0) first, and has read nothing the client sent
// since. A write caught by the close was not applied, so the client may
// send it again; when no later attempt can be sent before the caller's
// deadline (here the endpoint stops accepting connections before it
// closes this one), the error says so plainly instead of "may have been
// applied". An attempt still in flight at the deadline would be ambiguous,
// so the test leaves none.
func TestIdleCloseIsNotAmbiguous(t *testing.T) {
	var srv *fakeServer
	srv = newFakeServer(t, func(fc *fakeConn, req *wire.Request) {
		srv.ln.Close() // before the Closed frame: every retry finds the endpoint gone
		fc.reply(&wire.Response{Code: wire.Closed, Msg: "idle for 10m0s with nothing open: closing"})
	})
	c := newTestClient(t, []string{srv.addr()})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := c.Put(ctx, "/a/b", []byte("v"))
	if err == nil || errors.Is(err, ErrAmbiguous) {
		t.Fatalf("a put caught by an idle close: %v, want an error that is not ambiguous", err)
	}
	if n := len(srv.requests(wire.OpKVPut)); n == 0 {
		t.Fatal("the server saw no put")
	}
}
