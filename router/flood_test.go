package router

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/wardenlock/warden/wire"
)

// TestHostBudget: an IP's byte and frame buckets let the burst through and
// then ask the reader to pause for exactly the time the rate needs; a read
// larger than the bucket is charged a full bucket, never refused forever.
func TestHostBudget(t *testing.T) {
	s := newTestServer(t, Config{MaxFrame: 1000, Security: Security{ByteRate: 1000, ByteBurst: 2000, FrameRate: 10, FrameBurst: 5}})
	b := s.newHostBudget()
	now := time.Unix(1000, 0)
	if d := b.delay(now, 2000, 1); d != 0 {
		t.Fatalf("within the burst: pause %v", d)
	}
	if d := b.delay(now, 500, 1); d != 500*time.Millisecond {
		t.Fatalf("500 bytes over an empty 1000 B/s bucket: pause %v, want 500ms", d)
	}
	if d := b.delay(now, 0, 3); d != 0 {
		t.Fatalf("frames within their burst: pause %v", d)
	}
	if d := b.delay(now, 0, 1); d != 100*time.Millisecond {
		t.Fatalf("one frame over an empty 10/s bucket: pause %v, want 100ms", d)
	}
	if d := b.delay(now.Add(time.Hour), 1<<30, 0); d != 0 {
		t.Fatalf("a read larger than the bucket, after a full refill: pause %v (charged a full bucket, not refused)", d)
	}
	unlimited := newTestServer(t, Config{Security: Security{ByteRate: -1, FrameRate: -1}}).newHostBudget()
	if unlimited.bytes != nil || unlimited.frames != nil || unlimited.delay(now, 1<<30, 1<<20) != 0 {
		t.Fatal("negative rates must mean unlimited")
	}
}

// TestBudgetSharedPerAddress: every connection from one IP spends the same
// budget, and the budget is dropped when the IP's last connection ends.
func TestBudgetSharedPerAddress(t *testing.T) {
	s := newTestServer(t, Config{Security: Security{ConnRate: -1}})
	a1, b1 := net.Pipe()
	a2, b2 := net.Pipe()
	defer b1.Close()
	defer b2.Close()
	x, y := s.admitConn(a1), s.admitConn(a2)
	if x == nil || x != y {
		t.Fatalf("two connections from one address got budgets %p and %p, want one shared", x, y)
	}
	s.releaseConn(a1)
	s.releaseConn(a2)
	if len(s.gate.budgets) != 0 {
		t.Fatalf("%d budgets kept after the last connection ended", len(s.gate.budgets))
	}
}

// TestOversizeSkip: before the handshake nothing is skipped; by default an
// oversized frame is never skipped (the connection closes); with
// MaxOversize n, n bodies of at most four frames are skipped.
func TestOversizeSkip(t *testing.T) {
	def := &conn{s: newTestServer(t, Config{MaxFrame: 100})}
	def.hello = true
	if got := def.oversizeSkip(); got != 0 {
		t.Fatalf("default skip %d, want 0", got)
	}
	c := &conn{s: newTestServer(t, Config{MaxFrame: 100, Security: Security{MaxOversize: 2}})}
	if got := c.oversizeSkip(); got != 0 {
		t.Fatalf("skip %d before the handshake, want 0", got)
	}
	c.hello = true
	for i := 0; i < 2; i++ {
		if got := c.oversizeSkip(); got != 400 {
			t.Fatalf("skip %d after %d oversized frames, want 400", got, i)
		}
		c.sec.oversize++
	}
	if got := c.oversizeSkip(); got != 0 {
		t.Fatalf("skip %d after MaxOversize frames, want 0", got)
	}
}

// TestOversizedPrefixClosesBeforeBody: the reader answers TooLarge and
// closes after the 4-byte prefix; the body the client goes on sending is
// never read.
func TestOversizedPrefixClosesBeforeBody(t *testing.T) {
	s := newTestServer(t, Config{MaxFrame: 1024})
	a, b := net.Pipe()
	defer b.Close()
	c := newConn(s, a, nil)
	done := make(chan struct{})
	go func() { defer close(done); c.serve() }()
	hello, _ := wire.AppendFrame(nil, &wire.Request{ID: 1, Op: wire.OpHello, Rev: wire.ProtocolVersion})
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], 1<<20)
	go func() {
		b.Write(hello)
		b.Write(hdr[:])
		b.Write(bytes.Repeat([]byte{0xc1}, 4096)) // blocks: nobody reads it
	}()
	r := bufio.NewReader(b)
	var codes []wire.Code
	for {
		body, err := wire.ReadFrame(r, wire.DefaultMaxFrame, nil)
		if err != nil {
			break
		}
		var resp wire.Response
		if err := wire.DecodeResponse(body, &resp); err != nil {
			t.Fatal(err)
		}
		codes = append(codes, resp.Code)
	}
	<-done
	if len(codes) != 2 || codes[0] != wire.OK || codes[1] != wire.TooLarge {
		t.Fatalf("answers %v, want [ok, too large] and then the close", codes)
	}
}

// TestTLSRefusalDoesNotBlockAccept: refusing a TLS connection whose client
// never handshakes must not hold up the accept loop (the answer needs a
// handshake, so it is written from a goroutine with a deadline).
func TestTLSRefusalDoesNotBlockAccept(t *testing.T) {
	s := newTestServer(t, Config{Security: Security{MaxConnsPerAddr: 1}})
	a1, b1 := net.Pipe()
	a2, b2 := net.Pipe()
	defer b1.Close()
	defer b2.Close()
	if s.admitConn(tls.Server(a1, &tls.Config{})) == nil {
		t.Fatal("first connection refused")
	}
	// A silent client: if admitConn waited for its handshake, this call
	// would never return and the test would time out.
	if s.admitConn(tls.Server(a2, &tls.Config{})) != nil {
		t.Fatal("second connection from one address admitted over a limit of 1")
	}
}

// TestReaderGrowsAfterHandshake: frames pipelined behind the hello, and
// frames larger than the handshake's small buffer, are all read in order
// across the switch to the large buffer.
func TestReaderGrowsAfterHandshake(t *testing.T) {
	s := newTestServer(t, Config{})
	a, b := net.Pipe()
	defer b.Close()
	c := newConn(s, a, nil)
	done := make(chan struct{})
	go func() { defer close(done); c.serve() }()
	var burst []byte
	burst, _ = wire.AppendFrame(burst, &wire.Request{ID: 1, Op: wire.OpHello, Rev: wire.ProtocolVersion})
	for id := uint64(2); id <= 4; id++ { // pipelined: still buffered when the hello is handled
		burst, _ = wire.AppendFrame(burst, &wire.Request{ID: id, Op: wire.OpUnwatch, Stream: 99})
	}
	big, _ := wire.AppendFrame(nil, &wire.Request{ID: 5, Op: wire.OpUnwatch, Stream: 99, Auth: strings.Repeat("x", 20<<10)})
	go func() {
		b.Write(burst)
		b.Write(big)
	}()
	r := bufio.NewReader(b)
	for want := uint64(1); want <= 5; want++ {
		body, err := wire.ReadFrame(r, wire.DefaultMaxFrame, nil)
		if err != nil {
			t.Fatalf("answer %d: %v", want, err)
		}
		var resp wire.Response
		if err := wire.DecodeResponse(body, &resp); err != nil || resp.ID != want {
			t.Fatalf("answer %+v (%v), want id %d", resp, err, want)
		}
	}
	b.Close()
	<-done
}

// TestRefusalRate: past Security.RefusalRate refusals per second, refused
// connections are closed without an answer; below it (or with -1, always)
// each gets its TooMany frame.
func TestRefusalRate(t *testing.T) {
	refuseN := func(t *testing.T, refusalRate float64, n int) (answered int, silent int64) {
		s := newTestServer(t, Config{Security: Security{MaxConnsPerAddr: 1, ConnRate: -1, RefusalRate: refusalRate}})
		first, other := net.Pipe()
		t.Cleanup(func() { first.Close(); other.Close() })
		if s.admitConn(first) == nil {
			t.Fatal("first connection refused")
		}
		before := ReadFloodStats().SilentRefusals
		for i := 0; i < n; i++ {
			a, b := net.Pipe()
			got := make(chan bool, 1)
			go func() {
				b.SetReadDeadline(time.Now().Add(5 * time.Second))
				body, err := wire.ReadFrame(bufio.NewReader(b), wire.DefaultMaxFrame, nil)
				var r wire.Response
				got <- err == nil && wire.DecodeResponse(body, &r) == nil && r.Code == wire.TooMany
			}()
			if s.admitConn(a) != nil {
				t.Fatalf("connection %d over the per-address limit admitted", i)
			}
			if <-got {
				answered++
			}
			a.Close()
			b.Close()
		}
		return answered, ReadFloodStats().SilentRefusals - before
	}
	// One answer per 100 s (burst 1): no token comes back during the test,
	// however slow the machine.
	if answered, silent := refuseN(t, 0.01, 6); answered != 1 || silent != 5 {
		t.Fatalf("RefusalRate 0.01 (burst 1): %d of 6 refusals answered, %d silent; want 1 and 5", answered, silent)
	}
	if answered, silent := refuseN(t, -1, 6); answered != 6 || silent != 0 {
		t.Fatalf("RefusalRate -1: %d of 6 refusals answered, %d silent; want all answered", answered, silent)
	}
}
