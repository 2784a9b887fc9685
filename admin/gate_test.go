package admin

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"
)

// TestGateLimits: the admin port's gate keeps at most MaxConnsPerAddr
// connections per client IP (IPv6 addresses counted like IPv4 ones) and
// MaxConns in all, resets the others at accept, and gives a slot back when
// its connection closes.
func TestGateLimits(t *testing.T) {
	for _, tc := range []struct {
		name, listen string
		from         []string // one client IP per dial, in order
		want         []bool   // admitted?
	}{
		{"per address", "127.0.0.1:0", []string{"127.0.0.1", "127.0.0.1", "127.0.0.1", "127.0.0.2"}, []bool{true, true, false, true}},
		{"in all", "127.0.0.1:0", []string{"127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4"}, []bool{true, true, true, false}},
		{"IPv6", "[::1]:0", []string{"::1", "::1", "::1"}, []bool{true, true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", tc.listen)
			if err != nil {
				t.Skipf("cannot listen on %s here: %v", tc.listen, err)
			}
			g := newGate(ln, Limits{MaxConnsPerAddr: 2, MaxConns: 3}, slog.New(slog.NewTextHandler(io.Discard, nil)))
			defer g.Close()
			accepted := make(chan net.Conn, 16)
			go func() {
				for {
					c, err := g.Accept()
					if err != nil {
						return
					}
					accepted <- c
				}
			}()
			var kept []net.Conn
			for i, from := range tc.from {
				d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
				c, err := d.Dial("tcp", ln.Addr().String())
				switch {
				case errors.Is(err, syscall.ECONNRESET): // reset before connect returned: refused
				case err != nil:
					t.Skipf("cannot dial from %s here: %v", from, err)
				default:
					defer c.Close()
				}
				admitted := waitAdmit(t, g, accepted, int64(i+1-len(kept)))
				if admitted != nil {
					kept = append(kept, admitted)
				}
				if (admitted != nil) != tc.want[i] {
					t.Fatalf("dial %d from %s: admitted %v, want %v", i, from, admitted != nil, tc.want[i])
				}
			}
			// A closed connection gives its slot back.
			kept[0].Close()
			d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(tc.from[0])}}
			c, err := d.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if waitAdmit(t, g, accepted, g.refused.Load()+1) == nil {
				t.Fatalf("a new connection from %s after one of its connections closed was refused", tc.from[0])
			}
		})
	}
}

// waitAdmit waits for the gate to hand out the next connection (returned)
// or to have counted refusedAfter refusals (nil is returned).
func waitAdmit(t *testing.T, g *gate, accepted chan net.Conn, refusedAfter int64) net.Conn {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case c := <-accepted:
			return c
		case <-deadline:
			t.Fatal("the gate neither admitted nor refused a connection in 10 s")
		case <-time.After(5 * time.Millisecond):
			if g.refused.Load() >= refusedAfter {
				return nil
			}
		}
	}
}
